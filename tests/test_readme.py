"""The README cannot lie: every code block and command in it runs here, as a user would run it.

Python blocks are executed from the README's own text, in a folder the tests fill with user-like
logs (a plain ``step,reward`` CSV without metadata, a ``trainer_state.json`` with ``max_steps``, a
verl console log, a TensorBoard folder). Commands run through the CLI's ``main``. A block that no
test runs fails :func:`test_every_block_is_run_by_a_test`. The README's numbers are checked against
the result files that hold them.

The machinery here (blocks of a markdown page, the user-like logs, the command checks) is shared
with ``tests/test_docs.py``, which runs the documentation's pages the same way.
"""

from __future__ import annotations

import ast
import importlib
import json
import re
import shlex
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from bayesgrpo.interfaces.cli import main
from bayesgrpo.interfaces.cli.parser import build_parser
from bayesgrpo.logs.writers.tensorboard import write_tensorboard
from bayesgrpo.logs.writers.trl import write_trainer_state
from bayesgrpo.logs.writers.verl import write_verl_console
from bayesgrpo.model.reward_model import RewardModel

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: The explicit marker that keeps a test from running the block after it, and why: a MyST comment.
SKIP_MARKER = re.compile(r"^% skip-test: (.+)$")


@dataclass(frozen=True)
class Block:
    """One fenced code block of a markdown page."""

    language: str
    text: str
    line: int
    path: Path = README
    #: why no test runs it (the ``% skip-test: why`` line just above it), or None
    skip: str | None = None

    def run(self, namespace: dict[str, Any]) -> dict[str, Any]:
        """Execute a python block in ``namespace`` (its errors point at the page's own line)."""
        padded = "\n" * self.line + self.text  # tracebacks name the page's own line numbers
        exec(compile(padded, str(self.path), "exec"), namespace)
        return namespace

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line} ({self.language})"


def markdown_blocks(path: Path) -> list[Block]:
    """Every fenced code block of a page (```` ```lang ````; MyST directives such as
    ```` ```{toctree} ```` are not code), with the skip marker just above it, if any.
    """
    text = path.read_text(encoding="utf-8")
    blocks = []
    for match in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.S | re.M):
        line = text.count("\n", 0, match.start()) + 1
        above = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        skip = SKIP_MARKER.match(above)
        blocks.append(Block(match.group(1), match.group(2), line, path, skip.group(1) if skip else None))
    return blocks


def readme_blocks() -> list[Block]:
    return markdown_blocks(README)


#: What each block is recognised by, and the test that runs it.
BLOCK_TESTS = {
    "bayesgrpo demo": "test_setup_commands (and tests/test_main_job.py runs the demo)",
    "fit: numpyro, ": "tests/test_main_job.py (what the demo prints, checked against its own run)",
    "python -m pytest": "test_setup_commands",
    "bayesgrpo stop train.log": "test_stop_block",
    "bayesgrpo watch train.log": "test_watch_block",
    "plot_fan(update.curve_draws": "test_forecast_block",
    "predict_new_run(bundled_population()": "test_transfer_block",
}


def block(marker: str) -> Block:
    (found,) = [b for b in readme_blocks() if marker in b.text]
    return found


def test_every_block_is_run_by_a_test():
    unmatched = []
    for b in readme_blocks():
        markers = [m for m in BLOCK_TESTS if m in b.text]
        if len(markers) != 1:
            unmatched.append(f"README line {b.line} ({b.language}): matches {markers or 'no test'}")
    assert not unmatched, "every README block needs exactly one test in tests/test_readme.py:\n" + "\n".join(
        unmatched
    )


def test_the_readme_is_short():
    """Set-up, four examples, the headline results and links into the docs: 200 lines at most."""
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200, len(lines)
    headings = [line for line in lines if line.startswith("## ")]
    assert headings == ["## Set up", "## Examples", "## Results", "## Documentation"], headings


# ------------------------------------------------------------------------------------------------
# user-like logs


def _saturating(n: int, seed: int, noise: float = 0.05) -> pd.DataFrame:
    """A smooth saturating reward curve plus noise: the run a newcomer brings."""
    steps = np.arange(1, n + 1)
    rng = np.random.default_rng(seed)
    reward = 0.2 + 0.55 * (1.0 - np.exp(-steps / 18.0)) + rng.normal(0.0, noise, n)
    return pd.DataFrame({"step": steps, "reward": reward.round(4)})


def write_user_logs(root: Path) -> None:
    """Every log the README's and the guide's blocks name, written as the tools write them."""
    plain = _saturating(60, seed=0)
    plain.to_csv(root / "my_run.csv", index=False)  # no run_id, no metadata: a plain table
    plain.head(12).to_csv(root / "first_steps.csv", index=False)
    verl = _saturating(80, seed=1).rename(columns={"reward": "critic/score/mean"})
    for name in ("runs/verl_qwen7b.log", "train.log", "logs/verl_qwen7b.log"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        write_verl_console(root / name, verl, total_training_steps=200)
    for folder in ("tb_logs", "tensorboard_log/my_project/qwen_grpo"):
        write_tensorboard(root / folder, verl)
    for folder in ("outputs/checkpoint-500", "logs/outputs/checkpoint-60"):
        (root / folder).mkdir(parents=True)
        write_trainer_state(root / folder / "trainer_state.json", _saturating(60, seed=2), max_steps=500)
    plain.to_csv(root / "logs" / "my_run.csv", index=False)


@pytest.fixture
def user_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    write_user_logs(tmp_path)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def shrink_sampling(monkeypatch: pytest.MonkeyPatch) -> None:
    """``RewardModel.fit`` with few draws: the pages' blocks check that the API works, not the fit."""
    fit = RewardModel.fit

    def few_draws(self: RewardModel, runs: Any, **kwargs: Any) -> RewardModel:
        kwargs.setdefault("draws", 100)
        kwargs.setdefault("tune", 150)
        kwargs.setdefault("random_seed", 1)
        return fit(self, runs, **{**kwargs, "progressbar": False})

    monkeypatch.setattr(RewardModel, "fit", few_draws)


# ------------------------------------------------------------------------------------------------
# set-up, extras, names


def test_setup_commands():
    demo_block, tests_block = block("bayesgrpo demo"), block("python -m pytest")
    assert demo_block.language == tests_block.language == "bash"
    assert demo_block.text.strip().endswith("pip install -e . && bayesgrpo demo")
    assert demo_block.line < tests_block.line  # the main job first, then the tests
    # CI runs the README's test command verbatim, as its last step
    ci_lines = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    assert ci_lines[-1].strip() == tests_block.text.strip()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["scripts"]["bayesgrpo"].startswith("bayesgrpo.interfaces.cli")
    assert {"test", "trl"} <= set(project["project"]["optional-dependencies"])
    assert '"demo"' in (ROOT / "tests" / "test_main_job.py").read_text()


def extras_named(path: Path) -> list[str]:
    return re.findall(r"bayesgrpo\[(\w+)\]", path.read_text(encoding="utf-8"))


def test_extras_named_exist():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    named = extras_named(README)
    assert set(named) <= set(project["project"]["optional-dependencies"])


def dotted_names(path: Path) -> set[str]:
    """The ``bayesgrpo.x.y`` names a page gives in inline code."""
    spans = re.findall(r"`([^`\n]+)`", path.read_text(encoding="utf-8"))
    return {m for s in spans for m in re.findall(r"\bbayesgrpo(?:\.[A-Za-z_]\w*)+", s)}


def resolve(dotted: str) -> object:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            obj = getattr(obj, attribute)
        return obj
    raise ModuleNotFoundError(dotted)


def missing_names(path: Path) -> list[str]:
    """The names a page gives or its python blocks import from bayesgrpo that do not exist."""
    names = set(dotted_names(path))
    for b in markdown_blocks(path):
        if b.language == "python":
            for node in ast.walk(ast.parse(b.text)):
                if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("bayesgrpo"):
                    names |= {f"{node.module}.{alias.name}" for alias in node.names}
    missing = []
    for name in sorted(names):
        try:
            resolve(name)
        except (AttributeError, ModuleNotFoundError) as error:
            missing.append(f"{path.name}: {name}: {error}")
    return missing


def test_every_name_the_readme_gives_exists():
    assert dotted_names(README)
    assert not missing_names(README)


def files_and_modules_missing(path: Path) -> list[str]:
    """Modules run with ``python -m``, scripts run with ``python``, and repository links of a page
    (links relative to the page itself, as GitHub and Sphinx read them) that do not exist.
    """
    text = path.read_text(encoding="utf-8")
    modules = re.findall(r"python -m (bayesgrpo[\w.]*)", text)
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    scripts = re.findall(r"`python ((?:docs|benchmarks)/[\w/]+\.py)", text)
    missing += [s for s in scripts if not (ROOT / s).exists()]
    for link in re.findall(r"\]\(([^)#:\s]+)(?:#[^)]*)?\)", text):
        target = (path.parent / link).resolve()
        generated = "_generated/" in link  # written by docs/conf.py at build time
        if not generated and not target.exists():
            missing.append(link)
    return missing


def test_files_and_modules_the_readme_runs_exist():
    assert not files_and_modules_missing(README)


# ------------------------------------------------------------------------------------------------
# commands


def subcommands() -> dict[str, Any]:
    parser = build_parser()
    (sub,) = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
    return dict(sub.choices)


def command_lines(b: Block) -> Iterator[str]:
    """The ``bayesgrpo ...`` command lines of a shell block, comments and continuations removed."""
    for line in b.text.replace("\\\n", " ").splitlines():
        command = line.split("#", 1)[0].strip()
        if command.startswith("bayesgrpo "):
            yield command


def commands_in(path: Path) -> Iterator[str]:
    """Every ``bayesgrpo VERB ...`` of a page: its shell blocks' lines and its inline code."""
    for b in markdown_blocks(path):
        if b.language == "bash":
            yield from command_lines(b)
    yield from re.findall(r"`(bayesgrpo [a-z]+(?: [^`]*)?)`", path.read_text(encoding="utf-8"))


def wrong_options(command: str, verbs: dict[str, Any]) -> list[str]:
    """What is wrong with one ``bayesgrpo VERB ...``: a verb, option or choice the CLI lacks."""
    words = command.split()
    verb = words[1]
    if verb not in verbs:
        return [f"{command!r}: no verb {verb!r}"]
    options = {o: a for a in verbs[verb]._actions for o in a.option_strings}
    wrong = []
    for token in re.findall(r"--?[a-z][\w-]*(?:\s+[^\s\[\]]+)?", command):
        name, _, value = token.partition(" ")
        if name not in options:
            wrong.append(f"{command!r}: {verb} has no option {name}")
            continue
        choices = options[name].choices
        if choices and value and not value.startswith("-"):
            unknown = [v for v in value.strip("]").split("|") if v not in choices]
            if unknown:
                wrong.append(f"{command!r}: {name} does not take {unknown}")
    return wrong


def test_command_synopses():
    """Every ``bayesgrpo VERB ...`` the README shows names a verb and options the CLI has."""
    verbs = subcommands()
    commands = list(commands_in(README))
    assert len(commands) >= 5
    wrong = [w for command in commands for w in wrong_options(command, verbs)]
    assert not wrong, "\n".join(wrong)


def test_stop_block(user_folder, capsys):
    """Each ``bayesgrpo stop`` line of the README on the user-like logs it names."""
    horizons = {}
    for line in command_lines(block("bayesgrpo stop train.log")):
        argv = shlex.split(line)[1:]
        code, out, err = cli([*argv, "--json"] if "--json" not in argv else argv, capsys)
        assert code == 0, f"{line}: {err}"
        answers = json.loads(out)
        assert answers and all(a["decision"] in {"stop", "continue"} for a in answers), line
        assert all(a["band"] == "predictive" for a in answers)
        horizons |= {a["run_id"]: a["horizon_step"] for a in answers}
    # the horizon each log states (verl's total steps, trainer_state.json's max_steps), else given
    assert horizons == {"train": 200, "outputs": 500, "verl_qwen7b": 200, "my_run": 1000}


@pytest.mark.slow
def test_watch_block(user_folder, capsys):
    """Each ``bayesgrpo watch`` line of the README, for one poll (``--once`` added)."""
    lines = list(command_lines(block("bayesgrpo watch train.log")))
    assert len(lines) >= 2
    for line in lines:
        argv = shlex.split(line)[1:]
        code, out, err = cli([*argv, "--once"], capsys)
        assert code == 0, f"{line}: {err}"
        assert out.strip() and "error" not in out.lower(), f"{line}:\n{out}"


# ------------------------------------------------------------------------------------------------
# python blocks


def test_forecast_block(user_folder):
    """The notebook example: a live forecast of the plain CSV and its fan chart."""
    namespace = block("plot_fan(update.curve_draws").run({})
    update = namespace["update"]
    quantiles = update.quantiles([100, 200])
    assert list(quantiles["step"]) == [100, 200] and (quantiles["q05"] < quantiles["q95"]).all()
    assert update.horizon_step == 200 and update.run_id == "my_run"
    ax = namespace["plot_fan"](update.curve_draws, "my_run", observed=namespace["run"])
    assert ax.get_title() == "my_run" and ax.collections  # its bands are drawn


def test_transfer_block():
    prediction = block("predict_new_run(bundled_population()").run({})["prediction"]
    table = prediction.table
    assert table["step"].iloc[-1] == 500
    assert ((table["q05"] <= table["q50"]) & (table["q50"] <= table["q95"])).all()
    assert table["q95"].max() <= 1.0 and table["q05"].min() >= 0.0  # inside the stated range


# ------------------------------------------------------------------------------------------------
# the results, once


def test_the_results_are_stated_once_with_their_command():
    text = README.read_text(encoding="utf-8")
    assert text.count("## Results") == 1
    results = text.split("## Results", 1)[1].split("\n## ", 1)[0]
    assert "`python benchmarks/corpus_live.py`" in results
    assert "not yet ahead of carrying the last value forward" in results
    # every interval in its table is one the result file holds, in its sealed fold's rows
    corpus = (ROOT / "benchmarks" / "results" / "corpus_live.md").read_text(encoding="utf-8")
    sealed = "\n".join(line for line in corpus.splitlines() if line.startswith("| sealed |"))
    cells = re.findall(r"\d\.\d\d \[-?\d\.\d\d, -?\d\.\d\d\]", results)
    assert len(cells) == 9
    assert [c for c in cells if c not in sealed] == []
    # the speeds, each with its command and in its result file
    live = (ROOT / "benchmarks" / "results" / "live_update.md").read_text(encoding="utf-8")
    assert "`python benchmarks/live_update.py" in results and "**31 ms**" in live and "31 ms" in results
    sampler = (ROOT / "benchmarks" / "results" / "sampler_speed.md").read_text(encoding="utf-8")
    assert "`python benchmarks/sampler_speed.py" in results and "| numpyro | 46 |" in sampler
