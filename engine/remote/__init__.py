"""The remote engine: a Realtime-protocol client of model servers (vllm-omni, serve-engine)."""
