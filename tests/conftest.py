from tests.cascade_fixtures import cascade_engine

__all__ = ["cascade_engine"]
