from tests.cascade_fixtures import cascade_engine
from tests.qwen_fixtures import omni, omni_dir

__all__ = ["cascade_engine", "omni", "omni_dir"]
