"""What calls and Realtime connections share about turns: an engine session's events pumped
out, the user's controls, and what a finished turn does."""
