from omnicall.engine.cascade.reply_filters import clean_delta


def test_clean_delta_strips_markup() -> None:
    assert clean_delta("**Hi** `there` # yes") == "Hi there  yes"
