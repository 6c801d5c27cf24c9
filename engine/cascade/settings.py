"""Settings of the CPU cascade engine (kept free of heavy imports)."""

from __future__ import annotations

from dataclasses import dataclass, field

from omnicall.engine.conversation.settings import ConversationSettings


@dataclass(frozen=True)
class CascadeSettings(ConversationSettings):
    """The turns, the camera and the persona (``instructions``: the LLM's system prompt, '' =
    the built-in one) are :class:`ConversationSettings`'. A field with help text is the
    server's flag of the same name (``llm_context``: ``--llm-context``), declared here only;
    the others are the engine's own knobs (``bench/voice_to_voice.py --ab``)."""

    #: path to a GGUF; '' = bundled SmolLM2-135M-Instruct
    llm: str = field(default="", metadata={
        "help": "GGUF chat model path ('' = bundled SmolLM2-135M-Instruct)"})
    llm_url: str = field(default="", metadata={
        "help": "an OpenAI-compatible server's base URL (http://HOST:PORT/v1: llama.cpp's "
                "server, Ollama, vLLM, ...) to use instead of the local model"})
    llm_model: str = field(default="", metadata={
        "help": "with --llm-url: the model name to ask for ('' = the server's first model)"})
    llm_key: str = field(default="", metadata={
        "help": "with --llm-url: API key sent as a bearer token"})
    #: the camera frames the frame policy picks go with the user's turns (image_url parts);
    #: off, or once the server refuses images: the face sentence
    llm_vision: bool = field(default=False, metadata={
        "help": "with --llm-url: send camera frames with the user's turns (image_url parts, "
                "JPEG data URLs; early while the user speaks, for servers that cache "
                "prompts) to a vision model; a server that refuses images gets the camera "
                "described in words, and the page is told once"})
    #: with llm_vision: frames go to the server as the user speaks (a one-token request per
    #: new frame), so a server that caches prompts has them prefilled at the end of the turn
    llm_vision_early: bool = True
    llm_audio_in: bool = field(default=False, metadata={
        "help": "with --llm-url: send the user's speech itself (input_audio, WAV) so an omni "
                "model (Qwen3-Omni on vllm-omni) hears tone and words; the user's caption "
                "still comes from the local ASR"})
    #: text-only replies get the local voice
    llm_audio_out: bool = field(default=False, metadata={
        "help": "with --llm-url: ask for the server's own voice (modalities text + audio) "
                "and play its streamed audio (vllm-omni's audio chunks, OpenAI's "
                "delta.audio); a reply without audio is said by the local voice"})
    llm_voice: str = field(default="alloy", metadata={
        "help": "with --llm-audio-out: the voice asked for (OpenAI's names; vllm-omni uses "
                "its model's default speaker)"})
    #: path to a CTranslate2 Whisper dir, a bundled model's name; '' = bundled tiny.en
    asr: str = field(default="", metadata={
        "help": "the speech recognizer: '' (the bundled Whisper tiny.en, English only), "
                "'base' (the bundled Whisper base: multilingual, about twice the time per "
                "turn; see docs/room.md) or a CTranslate2 Whisper model dir"})
    asr_beam_size: int = field(default=1, metadata={
        "help": "Whisper beam size (1 = greedy; 3 had fewer word errors at the same median "
                "time but a slower p95: see bench/asr_wer.py)"})
    #: partial transcripts on a second copy of the ASR model with this many threads, so the
    #: final one never waits behind a partial (0: partials share the final's model and worker)
    asr_partial_threads: int = field(default=1, metadata={
        "help": "threads of the second ASR model copy that makes the partial transcripts (0 "
                "= no copy: partials share the final transcript's model and may delay it; "
                "saves the memory of a big --asr model)"})
    voice: str = field(default="", metadata={
        "help": "Piper voice .onnx path, 'espeak', or '' (bundled en_US joe)"})
    #: the turns' final transcripts come from this server (``asr`` stands in when it fails);
    #: partial transcripts stay local
    asr_url: str = field(default="", metadata={
        "help": "an OpenAI-compatible transcription server's base URL (http://HOST:PORT/v1: "
                "vLLM with Whisper, transformers serve, faster-whisper servers, OpenAI): each "
                "turn's final transcript comes from its /v1/audio/transcriptions (the cleaned "
                "audio as WAV, --language passed on); partial transcripts stay local; on an "
                "error or --asr-timeout-s the local model (--asr) hears the turn, and the page "
                "and the log say so once"})
    asr_model: str = field(default="", metadata={  # '' = whisper-1, OpenAI's name
        "help": "with --asr-url: the model to ask for ('' = whisper-1)"})
    asr_key: str = field(default="", metadata={
        "help": "with --asr-url: API key sent as a bearer token"})
    asr_timeout_s: float = field(default=3.0, metadata={
        "help": "with --asr-url: a transcription not back this long after it was asked for "
                "is made by the local model instead"})
    #: off: none (the reply still starts at the pause, its prompt without the words heard
    #: so far)
    asr_partials: bool = field(default=True, metadata={
        "help": "partial transcripts on the local model while the user speaks (they fill "
                "the LLM's prompt cache early); off: none (with --asr-url nothing is heard "
                "locally unless the server fails)"})
    #: a turn's final transcript starts at its speech's first silent VAD chunk (the lull),
    #: 64 ms before the pause that starts the speculative reply; off: at the pause
    asr_early: bool = True
    #: replies are spoken by this server (PCM streamed, clause by clause); ``voice`` stands
    #: in when it fails
    tts_url: str = field(default="", metadata={
        "help": "an OpenAI-compatible speech server's base URL (http://HOST:PORT/v1: Kokoro "
                "or Piper servers, OpenAI): replies are spoken by its /v1/audio/speech, "
                "clause by clause, its PCM played as it arrives (24 kHz unless the server's "
                "X-Sample-Rate header says otherwise); a barge-in closes the stream; on an "
                "error or --tts-timeout-s the local voice (--voice) speaks, said once"})
    tts_model: str = field(default="", metadata={  # '' = tts-1, OpenAI's name
        "help": "with --tts-url: the model to ask for ('' = tts-1)"})
    tts_voice: str = field(default="alloy", metadata={
        "help": "with --tts-url: the voice to ask for (OpenAI's names such as alloy; the "
                "server's own names, e.g. af_heart for Kokoro)"})
    tts_key: str = field(default="", metadata={
        "help": "with --tts-url: API key sent as a bearer token"})
    tts_timeout_s: float = field(default=3.0, metadata={
        "help": "with --tts-url: no sound from the server this long (first or next piece) "
                "and the local voice says the clause"})
    llm_threads: int = 1  # decode threads once the reply plays (a core for the other calls)
    #: decode threads until the first clause is out (bench --ab llm_sprint_threads=1: the
    #: first clause came ~85 ms sooner on 2 threads)
    llm_sprint_threads: int = 2
    asr_threads: int = 2
    max_calls: int = 3  # concurrent calls two cores answer in time (docs/benchmarks.md)
    max_think_queue: int = 6  # model jobs waiting beyond this: new calls are turned away
    #: spoken when a call starts ('' = the assistant waits to be spoken to); the first 500
    #: characters
    greeting: str = field(default="", metadata={
        "help": "the assistant says this first when a call starts (kiosks)"})
    #: a turn is answered only when it begins with this phrase, or while the conversation is
    #: open (engine/conversation/wake.py); '' = every turn
    wake_phrase: str = field(default="", metadata={
        "help": "answer a turn only when it begins with this phrase ('hey kiosk'), or while "
                "the conversation is open (--wake-open-s after the assistant spoke or the "
                "phrase was heard): people passing by and chatting get no answer; '' (the "
                "default): every turn"})
    wake_open_s: float = field(default=8.0, metadata={
        "help": "with --wake-phrase: seconds the conversation stays open after the "
                "assistant's last word or the phrase"})
    max_reply_tokens: int = field(default=64, metadata={
        "help": "longest reply, in LLM tokens"})
    llm_context: int = field(default=2048, metadata={
        "help": "the LLM's context window in tokens (the conversation memory keeps 3/8 of "
                "it)"})
    camera_fact_confidence: float = field(default=0.5, metadata={
        "help": "without a model that sees: a camera fact (a colour, people, text read, "
                "what changed) less sure than this (0..1) is not said"})
    camera_read_timeout_s: float = field(default=2.0, metadata={
        "help": "without a model that sees: reading the text in the turn's frame (only when "
                "the words ask to read or look) is given up after this long"})
