"""Colour names: the palette on flat colours, and held objects told from their wall in
drawn camera pictures (shading, tilt, sensor noise)."""

from __future__ import annotations

import numpy as np
import pytest

from omnicall.engine.cascade.camera.colours import PALETTE, held_colours, shares, spoken
from tests.scenes import OBJECT_COLOURS, WALLS, hold_object, wall


@pytest.mark.parametrize(("rgb", "name"), [
    ((210, 30, 30), "red"), ((240, 140, 20), "orange"), ((230, 220, 40), "yellow"),
    ((40, 170, 60), "green"), ((30, 70, 210), "blue"), ((120, 40, 160), "purple"),
    ((255, 182, 193), "pink"), ((120, 70, 30), "brown"), ((15, 15, 15), "black"),
    ((240, 240, 240), "white"), ((128, 128, 128), "grey"), ((20, 30, 100), "blue"),
])
def test_a_flat_colour_is_named(rgb: tuple[int, int, int], name: str) -> None:
    image = np.zeros((48, 64, 3), np.uint8)
    image[:] = rgb
    assert shares(image)[0].name == name
    assert shares(image)[0].share == 1.0


def test_shares_add_up_and_come_largest_first() -> None:
    image = np.zeros((100, 100, 3), np.uint8)
    image[:, :70] = (210, 30, 30)
    image[:, 70:] = (240, 240, 240)
    got = shares(image)
    assert [c.name for c in got] == ["red", "white"]
    assert got[0].share == pytest.approx(0.7, abs=0.03)
    assert sum(c.share for c in got) == pytest.approx(1.0)
    assert spoken(got, 0.3) == "red and white" and spoken(got, 0.5) == "red"
    assert all(c.name in PALETTE for c in got)


@pytest.mark.parametrize("name", list(OBJECT_COLOURS))
def test_a_held_object_is_told_from_its_wall(name: str) -> None:
    wall_name = "blue" if name in ("white", "grey") else "grey" if name != "grey" else "white"
    scene = hold_object(wall(WALLS[wall_name], 3), OBJECT_COLOURS[name], 3)
    held = held_colours(scene)
    assert held and held[0].name == name, held


def test_nothing_held_stands_out_from_a_plain_wall() -> None:
    assert held_colours(wall(WALLS["grey"], 1)) == ()


def test_a_dim_picture_is_seen_as_eyes_adapt_to_it() -> None:
    from tests.scenes import lit

    dim = lit(hold_object(wall(WALLS["white"], 6), OBJECT_COLOURS["red"], 6), (0.5, 0.5, 0.5))
    assert held_colours(dim)[0].name == "red"  # not brown: the whole room is dim
    grey = np.full((48, 64, 3), 128, np.uint8)
    assert shares(grey)[0].name == "grey"  # a mid-grey picture is not brightened to white
