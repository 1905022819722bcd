"""The frame strip: frame picks, the PNG from rendered clips, and modes generated from one seed."""
import pytest
import torch

from wan_fp4.eval import strip
from wan_fp4.pipelines import world


def test_frame_indices_spread_from_first_to_last():
    assert strip.frame_indices(17, 5) == [0, 4, 8, 12, 16]
    assert strip.frame_indices(5, 1) == [0]
    with pytest.raises(ValueError, match="shown"):
        strip.frame_indices(17, 0)


def test_plot_strip_writes_a_png_of_rendered_clips(tmp_path):
    pytest.importorskip("matplotlib")
    specs = [world.sample_clip(torch.Generator().manual_seed(i), colour="red", shape="ball", direction="right")
             for i in range(2)]
    video = ((world.render(specs) + 1) / 2).permute(0, 2, 3, 4, 1).numpy()
    path = strip.plot_strip({"bf16": video, "direct-p": video}, ["a red ball moving right"] * 2, tmp_path / "s.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_generate_modes_differ_only_by_attention():
    from wan_fp4.pipelines import load_pipeline

    pipe = load_pipeline("tiny-random", "cpu", torch.float32)
    pipe.set_progress_bar_config(disable=True)
    geometry = dict(height=32, width=32, frames=5, steps=2)
    videos = strip.generate_modes(pipe, ["a red ball moving right"], ["bf16", "bf16", "direct-p"], seed=3, **geometry)
    assert list(videos) == ["bf16", "direct-p"]
    again = strip.generate_modes(pipe, ["a red ball moving right"], ["bf16"], seed=3, **geometry)
    assert (videos["bf16"] == again["bf16"]).all()  # seeded: the same video again
    assert videos["direct-p"].shape == videos["bf16"].shape and (videos["direct-p"] != videos["bf16"]).any()
    with pytest.raises(ValueError, match="prompts"):
        strip.generate_modes(pipe, [], ["bf16"], seed=0, **geometry)
