"""Settings of the CPU cascade engine (kept free of heavy imports)."""

from __future__ import annotations

from dataclasses import dataclass

from omnicall.engine.conversation.settings import ConversationSettings


@dataclass(frozen=True)
class CascadeSettings(ConversationSettings):
    """The turns, the camera and the persona (``instructions``: the LLM's system prompt, '' =
    the built-in one) are :class:`ConversationSettings`'. A field named as a flag
    (``llm_context``: ``--llm-context``) is that flag's setting, and its default the flag's."""

    llm: str = ""  # path to a GGUF; '' = bundled SmolLM2-135M-Instruct
    llm_url: str = ""  # an OpenAI-compatible server's /v1 URL instead of the local model
    llm_model: str = ""  # the model to ask that server for ('' = its first)
    llm_key: str = ""
    #: with llm_url: the camera frames the frame policy picks go with the user's turns
    #: (image_url parts); off, or once the server refuses images: the face sentence
    llm_vision: bool = False
    #: with llm_vision: frames go to the server as the user speaks (a one-token request per
    #: new frame), so a server that caches prompts has them prefilled at the end of the turn
    llm_vision_early: bool = True
    llm_audio_in: bool = False  # with llm_url: the user's speech itself (input_audio WAV)
    #: with llm_url: ask for the server's voice too (modalities text+audio) and play it
    #: when it comes; text-only replies get the local voice
    llm_audio_out: bool = False
    llm_voice: str = "alloy"  # the voice asked for with llm_audio_out (OpenAI's names)
    asr: str = ""  # path to a CTranslate2 Whisper dir; '' = bundled tiny.en
    voice: str = ""  # Piper .onnx path, 'espeak', or '' = bundled en_US joe
    #: an OpenAI-compatible transcription server's /v1 URL: the turns' final transcripts
    #: come from it (``asr`` stands in when it fails); partial transcripts stay local
    asr_url: str = ""
    asr_model: str = ""  # the model to ask that server for ('' = whisper-1, OpenAI's name)
    asr_key: str = ""
    asr_timeout_s: float = 3.0  # a transcription not back by then: the local model hears it
    #: partial transcripts while the user speaks (on the local model); off: none (the reply
    #: still starts at the pause, its prompt without the words heard so far)
    asr_partials: bool = True
    #: an OpenAI-compatible speech server's /v1 URL: replies are spoken by it (PCM streamed,
    #: clause by clause); ``voice`` stands in when it fails
    tts_url: str = ""
    tts_model: str = ""  # the model to ask that server for ('' = tts-1, OpenAI's name)
    tts_voice: str = "alloy"  # the voice to ask it for (OpenAI's names; Kokoro: af_heart...)
    tts_key: str = ""
    tts_timeout_s: float = 3.0  # no sound from the server this long: the local voice speaks
    llm_threads: int = 1  # decode threads once the reply plays (a core for the other calls)
    #: decode threads until the first clause is out (bench --ab llm_sprint_threads=1: the
    #: first clause came ~85 ms sooner on 2 threads)
    llm_sprint_threads: int = 2
    asr_threads: int = 2
    #: partial transcripts on a second copy of the ASR model with this many threads, so the
    #: final one never waits behind a partial (0: partials share the final's model and worker)
    asr_partial_threads: int = 1
    asr_beam_size: int = 1  # bench/asr_wer.py: 3 had fewer errors, same median, slower p95
    max_calls: int = 3  # concurrent calls two cores answer in time (docs/benchmarks.md)
    max_think_queue: int = 6  # model jobs waiting beyond this: new calls are turned away
    greeting: str = ""  # spoken when a call starts ('' = the assistant waits to be spoken to)
    #: a turn is answered only when it begins with this phrase, or while the conversation is
    #: open (engine/conversation/wake.py); '' = every turn
    wake_phrase: str = ""
    wake_open_s: float = 8.0  # the conversation stays open this long after the assistant spoke
    max_reply_tokens: int = 64
    llm_context: int = 2048  # the LLM's context window in tokens; the memory keeps 3/8 of it
    #: without a model that sees: a camera fact (a colour, a person, text read) less sure
    #: than this (0..1) is not said
    camera_fact_confidence: float = 0.5
    #: without a model that sees: reading the text in the picture (only when the words ask
    #: to read or look) is given up after this long, and the turn goes on without it
    camera_read_timeout_s: float = 2.0
