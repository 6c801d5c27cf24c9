"""``serve-engine``: omnicall's engines served over the OpenAI Realtime protocol (the server,
its audio and image input, replies as server events, the client's tools)."""
