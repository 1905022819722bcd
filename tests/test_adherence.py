"""The prompt-adherence detector: validated on ground truth before it scores a model."""
import numpy as np
import pytest

from wan_fp4.eval import adherence
from wan_fp4.pipelines import world


def test_detector_reads_ground_truth_on_the_fixed_validation_set():
    result = adherence.validate(n=200)
    assert result.clips == 200
    assert result.accuracy["all"] >= 0.98, result.failures[:5]


def test_detector_sees_nothing_on_a_blank_clip_and_no_motion_on_a_still_one():
    blank = np.full((17, 64, 64, 3), 0.5)
    assert adherence.read(blank) == adherence.Reading(None, None, None)
    spec = world.sample_clips(1, seed=1, size=64, frames=17, colour="red", shape="square", second=False)[0]
    video = ((world.render([spec]) + 1) / 2)[0].permute(1, 2, 3, 0).numpy()
    still = np.repeat(video[:1], 17, axis=0)
    reading = adherence.read(still)
    assert (reading.colour, reading.shape, reading.direction) == ("red", "square", None)


def test_a_wrong_attribute_is_scored_wrong():
    spec = world.sample_clips(1, seed=2, colour="green", shape="ball", direction="left", second=False)[0]
    video = ((world.render([spec]) + 1) / 2)[0].permute(1, 2, 3, 0).numpy()
    reading = adherence.read(video)
    assert reading.matches("a green ball moving left")["all"]
    hits = reading.matches("a green square moving right")
    assert (hits["colour"], hits["shape"], hits["direction"], hits["all"]) == (True, False, False, False)
    mirrored = adherence.read(video[:, :, ::-1])
    assert mirrored.direction == "right"
    assert adherence.score([(reading, "a green ball moving left"), (mirrored, "a green ball moving left")]) == {
        "colour": 1.0, "shape": 1.0, "direction": 0.5, "all": 0.5}


def test_frames_of_the_wrong_layout_are_an_error():
    with pytest.raises(ValueError, match="frames must be"):
        adherence.read(np.zeros((17, 3, 64, 64)))
