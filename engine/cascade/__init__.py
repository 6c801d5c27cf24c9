"""The embedded CPU engine: a Thinker (VAD, ASR, vision facts, small LLM) and a Talker (TTS)
built only from models that ship inside packages, so it runs offline on a laptop."""
