"""The procedural world: captions follow the grammar, backgrounds avoid object colours, clips are
seeded, objects stay in frame and move the way the caption says."""
import pytest
import torch

from wan_fp4.pipelines import world


def test_captions_follow_the_grammar_and_name_the_main_object():
    for spec in world.sample_clips(300, seed=3):
        text = spec.caption
        main = world.object_phrase(spec.main.colour, spec.main.shape, spec.main.direction)
        assert text.startswith(main)
        assert world.parse_prompt(text) == {"colour": spec.main.colour, "shape": spec.main.shape,
                                            "direction": spec.main.direction}
        if spec.second is not None:
            assert " and a small " in text and spec.second.colour != spec.main.colour
        assert (f" on a {spec.background} background" in text) == spec.background_in_caption


def test_every_required_prompt_is_in_the_fixed_set():
    prompts = world.prompt_set()
    assert len(prompts) == 32 and len(set(prompts)) == 32
    for colour in ("red", "green", "blue", "yellow"):
        for shape in ("ball", "square"):
            for direction in ("left", "right", "up", "down"):
                assert f"a {colour} {shape} moving {direction}" in prompts


def test_backgrounds_never_take_an_objects_colour_family():
    seen = set()
    for spec in world.sample_clips(400, seed=4):
        for obj in (spec.main, spec.second):
            if obj is not None:
                assert spec.background not in world.EXCLUDED_BACKGROUNDS[obj.colour]
        seen.add(spec.background)
    assert seen == set(world.BACKGROUNDS)
    gen = torch.Generator().manual_seed(0)
    with pytest.raises(ValueError, match="colour family"):
        world.sample_clip(gen, colour="blue", second=False, background="navy")


def test_clips_are_seeded_and_vary():
    a, b = world.sample_clips(20, seed=9), world.sample_clips(20, seed=9)
    assert a == b
    assert torch.equal(world.render(a[:3]), world.render(b[:3]))
    assert len({s.caption for s in a}) > 10
    assert a != world.sample_clips(20, seed=10)


@pytest.mark.parametrize("size,frames", [(128, 17), (64, 9)])
def test_objects_stay_in_frame_and_move_as_captioned(size, frames):
    specs = world.sample_clips(40, seed=5, size=size, frames=frames, second=False)
    video = world.render(specs)
    assert video.shape == (40, 3, frames, size, size) and video.dtype == torch.float32
    assert -1.0 <= float(video.min()) and float(video.max()) <= 1.0
    for spec in specs:
        obj = spec.main
        for f in (0, frames - 1):
            x, y = obj.centre(f)
            assert obj.half_size <= x <= size - obj.half_size and obj.half_size <= y <= size - obj.half_size
        (x0, y0), (x1, y1) = obj.centre(0), obj.centre(frames - 1)
        dx, dy = world.DIRECTIONS[obj.direction]
        assert (x1 - x0) * dx + (y1 - y0) * dy > 0


def test_bad_arguments_name_themselves():
    gen = torch.Generator().manual_seed(0)
    with pytest.raises(ValueError, match="size"):
        world.sample_clip(gen, size=100)
    with pytest.raises(ValueError, match="colour"):
        world.sample_clip(gen, colour="teal")
    with pytest.raises(ValueError, match="names no shape"):
        world.parse_prompt("a red car moving left")
    with pytest.raises(ValueError, match="share size"):
        world.render(world.sample_clips(1, seed=0, size=64) + world.sample_clips(1, seed=0, size=128))
