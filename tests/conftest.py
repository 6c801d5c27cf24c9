from tests.cascade_fixtures import cascade_engine
from tests.llm_servers import (
    recording_proxy,
    tiny_audio_checkpoint,
    tiny_audio_server,
    tiny_llm_checkpoint,
    tiny_llm_server,
    tiny_vlm_checkpoint,
    tiny_vlm_server,
)
from tests.qwen_fixtures import omni, omni_dir

__all__ = ["cascade_engine", "omni", "omni_dir", "recording_proxy", "tiny_audio_checkpoint",
           "tiny_audio_server", "tiny_llm_checkpoint", "tiny_llm_server", "tiny_vlm_checkpoint",
           "tiny_vlm_server"]
