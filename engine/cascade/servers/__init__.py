"""The cascade's clients of model servers (an OpenAI-compatible LLM, speech recognition and
speech servers) and the outage rule that falls back to the local models when one fails."""
