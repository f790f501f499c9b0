"""The finding type every detector returns, its severities and the action each finding suggests."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bayesgrpo.errors import BayesGRPOError

#: Severities, mildest first.
SEVERITIES: tuple[str, ...] = ("info", "warning", "high")
#: Columns of :func:`diagnose`'s table.
FINDING_COLUMNS: tuple[str, ...] = (
    "run_id",
    "name",
    "severity",
    "first_step",
    "last_step",
    "evidence",
    "action",
)

ACTIONS = {
    "collapse": (
        "Stop the run and restart from the checkpoint before the fall (step {peak_step:g}); lower "
        "the learning rate, raise the KL penalty or clip ratio, and check the reward function and "
        "the rollouts after the fall."
    ),
    "stall": (
        "The run is not improving and is far below comparable runs: stop it, or change what "
        "limits it (learning rate, prompt difficulty, group size, reward shaping)."
    ),
    "stall_never": (
        "The reward has not risen at all: check that the reward function can be satisfied (look "
        "at a few completions and their rewards), the learning rate and that gradients flow."
    ),
    "stall_early": (
        "No gain yet, but runs that learn often start this slowly: keep it running if a few "
        "completions show the reward can be earned; otherwise check the reward function, the "
        "learning rate and that gradients flow."
    ),
    "advantage_degeneracy": (
        "Most groups give every completion the same reward, so GRPO advantages are zero: if the "
        "reward is at its ceiling the prompts are solved (add harder ones or stop); otherwise "
        "raise the group size or temperature, or use a denser reward."
    ),
    "policy_concentration": (
        "The policy's entropy has collapsed, so exploration has stopped: raise the sampling "
        "temperature or an entropy bonus, lower the learning rate, or use a clip-higher rule."
    ),
    "oscillation": (
        "The reward rings around its level (damping ratio {zeta:.2f}, period about {period:.0f} "
        "steps): updates overshoot. Lower the learning rate, or raise the KL penalty or tighten "
        "the clip range; judge the level from the fitted asymptote, not from a peak or a trough."
    ),
    "reward_hacking": (
        "The training reward rises while {what}: inspect completions for exploits of the reward "
        "function, evaluate on held-out prompts, and consider a length penalty or a stronger KL."
    ),
}


@dataclass(frozen=True)
class Finding:
    """One problem found in one run.

    Attributes
    ----------
    run_id : str
    name : str
        ``"collapse"``, ``"stall"``, ``"advantage_degeneracy"``, ``"policy_concentration"``,
        ``"reward_hacking"`` or ``"oscillation"``.
    severity : str
        One of :data:`SEVERITIES`.
    first_step, last_step : int
        The steps the finding covers.
    evidence : dict
        The signals and values that raised it (plain floats, ints and strings).
    action : str
        What to do about it.
    """

    run_id: str
    name: str
    severity: str
    first_step: int
    last_step: int
    evidence: dict[str, Any] = field(default_factory=dict)
    action: str = ""

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise BayesGRPOError(f"severity {self.severity!r} is not one of {SEVERITIES}.")
