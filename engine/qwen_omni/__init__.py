"""Native Qwen3-Omni Thinker-Talker engine (transformers), streamed frame by frame."""
