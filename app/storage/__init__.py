"""What outlives a call: transcripts (files), the transcript store (memory or Redis) and
what of a call goes to it."""
