"""Each built-in engine's settings, from the server's flags (:class:`ServerConfig`): the
conversation's (:class:`~omnicall.engine.conversation.settings.ConversationSettings`: the turn
settings as one object, the camera, the persona, the language) and the engine's own."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from omnicall.app.config import ServerConfig
from omnicall.engine.cascade.settings import CascadeSettings
from omnicall.engine.qwen_omni.settings import OmniSettings
from omnicall.engine.remote.settings import RemoteSettings


def cascade_settings(config: ServerConfig) -> CascadeSettings:
    return CascadeSettings(turns=config.turn_settings(), camera=config.camera_settings(),
                           instructions=config.system_instructions, language=config.language,
                           llm=config.llm, asr=config.asr, voice=config.voice,
                           asr_beam_size=config.asr_beam_size,
                           asr_partial_threads=config.asr_partial_threads,
                           greeting=config.greeting[:500],
                           wake_phrase=config.wake_phrase, wake_open_s=config.wake_open_s,
                           max_reply_tokens=config.max_reply_tokens,
                           llm_context=config.llm_context,
                           llm_url=config.llm_url, llm_model=config.llm_model,
                           llm_key=config.llm_key, llm_vision=config.llm_vision,
                           llm_audio_in=config.llm_audio_in,
                           llm_audio_out=config.llm_audio_out, llm_voice=config.llm_voice,
                           asr_url=config.asr_url, asr_model=config.asr_model,
                           asr_key=config.asr_key, asr_timeout_s=config.asr_timeout_s,
                           asr_partials=config.asr_partials, tts_url=config.tts_url,
                           tts_model=config.tts_model, tts_voice=config.tts_voice,
                           tts_key=config.tts_key, tts_timeout_s=config.tts_timeout_s,
                           camera_fact_confidence=config.camera_fact_confidence,
                           camera_read_timeout_s=config.camera_read_timeout_s)


def omni_settings(config: ServerConfig) -> OmniSettings:
    return OmniSettings(turns=config.turn_settings(), camera=config.camera_settings(),
                        instructions=config.system_instructions, language=config.language,
                        model=config.model, device=config.device, dtype=config.dtype,
                        attention=config.attention, load_in_4bit=config.load_in_4bit,
                        text_only=config.text_only, speaker=config.speaker,
                        window_s=config.window_s, max_calls=config.max_sessions)


def remote_settings(config: ServerConfig) -> RemoteSettings:
    return RemoteSettings(turns=config.turn_settings(), camera=config.camera_settings(),
                          instructions=config.system_instructions, language=config.language,
                          engine_urls=tuple(config.engine_urls),
                          engine_model=config.engine_model, engine_key=config.engine_key,
                          turn_mode=config.turn_mode,
                          remote_video=config.remote_video and config.video,
                          max_calls=config.max_sessions)


# engine name -> (create_engine's keyword, the settings' builder)
_SETTINGS: dict[str, tuple[str, Callable[[ServerConfig], Any]]] = {
    "cascade": ("cascade", cascade_settings),
    "qwen-omni": ("omni", omni_settings),
    "remote": ("remote", remote_settings),
}


def engine_settings(config: ServerConfig) -> dict[str, Any]:
    """The settings :func:`omnicall.engine.registry.create_engine` takes for ``config.engine``,
    as its keyword arguments: that engine's only (``create_engine`` imports only the engine
    it builds; the settings modules are light)."""
    entry = _SETTINGS.get(config.engine)
    return {} if entry is None else {entry[0]: entry[1](config)}
