"""The README cannot lie: every code block and command in it runs here, as a user would run it.

Python blocks are executed from the README's own text, in a folder the tests fill with user-like
logs (a plain ``step,reward`` CSV without metadata, a ``trainer_state.json`` with ``max_steps``, a
verl console log, a TensorBoard folder). Commands run through the CLI's ``main``. Where a block
needs what cannot run here (verl, a GPU-sized GRPO run), the one thing replaced is named where it
is replaced, and the rest of the block runs as written. A block that no test runs fails
:func:`test_every_block_is_run_by_a_test`.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from mlflow.entities import Metric
from mlflow.tracking import MlflowClient

import bayesgrpo
from bayesgrpo.interfaces.cli import main
from bayesgrpo.interfaces.cli.parser import build_parser
from bayesgrpo.logs.writers.tensorboard import write_tensorboard
from bayesgrpo.logs.writers.trl import write_trainer_state
from bayesgrpo.logs.writers.verl import write_verl_console
from bayesgrpo.model.datasets import load_bundled
from bayesgrpo.model.reward_model import RewardModel
from tests.integrations.test_trl import tiny_gpt2
from tests.integrations.test_verl import FakeTracking, fake_fit, verl_metrics

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


@dataclass(frozen=True)
class Block:
    """One fenced code block of the README."""

    language: str
    text: str
    line: int

    def run(self, namespace: dict[str, Any]) -> dict[str, Any]:
        """Execute a python block in ``namespace`` (its errors point at the README's line)."""
        padded = "\n" * self.line + self.text  # tracebacks name the README's own line numbers
        exec(compile(padded, str(README), "exec"), namespace)
        return namespace


def readme_blocks() -> list[Block]:
    text = README.read_text(encoding="utf-8")
    blocks = []
    for match in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.S | re.M):
        line = text.count("\n", 0, match.start()) + 1
        blocks.append(Block(match.group(1), match.group(2), line))
    return blocks


#: What each block is recognised by, and the test that runs it.
BLOCK_TESTS = {
    "bayesgrpo demo": "test_setup_commands (and tests/test_main_job.py runs the demo)",
    "fit: numpyro, ": "tests/test_main_job.py (what the demo prints, checked against its own run)",
    "python -m pytest": "test_setup_commands",
    'table = bayesgrpo.load_runs(["runs/verl_qwen7b.log"': "test_reading_logs_block",
    "bayesgrpo runs PATH": "test_command_synopses",
    "write_trainer_state(": "test_writers_block",
    "model = bayesgrpo.RewardModel(": "test_python_walkthrough_on_bundled_and_user_logs",
    "steps_to_fraction(draws": "test_python_walkthrough_on_bundled_and_user_logs",
    "live = bayesgrpo.LiveForecaster(": "test_python_walkthrough_on_bundled_and_user_logs",
    "bayesgrpo stop LOGS": "test_command_synopses, test_stop_and_forecast_on_user_logs",
    'pip install "bayesgrpo[trl]"': "test_extras_named_exist",
    "BayesStopCallback(": "test_trl_callback_block",
    "bayesgrpo watch train.log": "test_watch_block",
    "@register_trainer": "test_verl_block",
    "predict_new_run(population, new_run": "test_python_walkthrough_on_bundled_and_user_logs",
    "bayesgrpo diagnose LOGS": "test_command_synopses, test_diagnose_on_user_logs",
    "bayesgrpo report logs/": "test_python_walkthrough_on_bundled_and_user_logs",
    "RewardCurvePruner(": "test_optuna_block",
    'load_runs(["mlflow:sqlite:///mlflow.db#grpo-sweep"])': "test_mlflow_block",
    'load_runs(["wandb/"])': "test_wandb_offline_block",
    'bayesgrpo stop "mlflow:': "test_command_synopses (and tests/logs/readers/test_mlflow.py, a server)",
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


# ------------------------------------------------------------------------------------------------
# user-like logs


def _saturating(n: int, seed: int, noise: float = 0.05) -> pd.DataFrame:
    """A smooth saturating reward curve plus noise: the run a newcomer brings."""
    steps = np.arange(1, n + 1)
    rng = np.random.default_rng(seed)
    reward = 0.2 + 0.55 * (1.0 - np.exp(-steps / 18.0)) + rng.normal(0.0, noise, n)
    return pd.DataFrame({"step": steps, "reward": reward.round(4)})


def write_user_logs(root: Path) -> None:
    """Every log the README's blocks name, written as the tools write them."""
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


# ------------------------------------------------------------------------------------------------
# set-up, extras, names


def test_setup_commands():
    demo_block, tests_block = readme_blocks()[0], readme_blocks()[1]
    assert demo_block.text.strip().endswith("pip install -e . && bayesgrpo demo")
    # CI runs the README's test command verbatim, as its last step
    ci_lines = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    assert ci_lines[-1].strip() == tests_block.text.strip()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["scripts"]["bayesgrpo"].startswith("bayesgrpo.interfaces.cli")
    assert {"test", "trl"} <= set(project["project"]["optional-dependencies"])
    assert '"demo"' in (ROOT / "tests" / "test_main_job.py").read_text()


def test_extras_named_exist():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    named = re.findall(r"bayesgrpo\[(\w+)\]", README.read_text())
    assert named and set(named) <= set(project["project"]["optional-dependencies"])


def _dotted_names() -> set[str]:
    spans = re.findall(r"`([^`\n]+)`", README.read_text())
    return {m for s in spans for m in re.findall(r"\bbayesgrpo(?:\.[A-Za-z_]\w*)+", s)}


def _resolve(dotted: str) -> object:
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


def test_every_name_the_readme_gives_exists():
    names = _dotted_names()
    assert len(names) > 10
    missing = []
    for name in sorted(names):
        try:
            _resolve(name)
        except (AttributeError, ModuleNotFoundError) as error:
            missing.append(f"{name}: {error}")
    assert not missing, "\n".join(missing)
    imported = []
    for b in readme_blocks():
        if b.language == "python":
            for node in ast.walk(ast.parse(b.text)):
                if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("bayesgrpo"):
                    imported += [f"{node.module}.{alias.name}" for alias in node.names]
    for name in imported:
        _resolve(name)
    # the figure functions' table
    plotted = re.findall(r"^\| `(plot_\w+)\(", README.read_text(), re.M)
    assert len(plotted) >= 6
    for name in plotted:
        _resolve(f"bayesgrpo.interfaces.plotting.{name}")


def test_files_and_modules_the_readme_runs_exist():
    text = README.read_text()
    for module in re.findall(r"python -m (bayesgrpo[\w.]*)", text):
        assert importlib.util.find_spec(module) is not None, module
    for script in re.findall(r"`python ((?:docs|benchmarks)/[\w/]+\.py)", text):
        assert (ROOT / script).exists(), script
    for link in re.findall(r"\]\(((?:docs|benchmarks|notebooks|data)/[^)#]+)\)", text):
        assert (ROOT / link).exists(), link


# ------------------------------------------------------------------------------------------------
# commands


def _subcommands() -> dict[str, Any]:
    parser = build_parser()
    (sub,) = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
    return dict(sub.choices)


def _commands_in_readme() -> Iterator[str]:
    text = README.read_text()
    for b in readme_blocks():
        if b.language == "bash":
            for line in b.text.replace("\\\n", " ").splitlines():
                command = line.split("#", 1)[0].strip()
                if command.startswith("bayesgrpo "):
                    yield command
    yield from re.findall(r"`(bayesgrpo [a-z]+(?: [^`]*)?)`", text)


def test_command_synopses():
    """Every ``bayesgrpo VERB ...`` the README shows names a verb and options the CLI has."""
    verbs = _subcommands()
    commands = list(_commands_in_readme())
    assert len(commands) > 15
    wrong = []
    for command in commands:
        words = command.split()
        verb = words[1]
        if verb not in verbs:
            wrong.append(f"{command!r}: no verb {verb!r}")
            continue
        options = {o: a for a in verbs[verb]._actions for o in a.option_strings}
        tokens = re.findall(r"--?[a-z][\w-]*(?:\s+[^\s\[\]]+)?", command)
        for token in tokens:
            name, _, value = token.partition(" ")
            if name not in options:
                wrong.append(f"{command!r}: {verb} has no option {name}")
                continue
            choices = options[name].choices
            if choices and value and not value.startswith("-"):
                unknown = [v for v in value.strip("]").split("|") if v not in choices]
                if unknown:
                    wrong.append(f"{command!r}: {name} does not take {unknown}")
    assert not wrong, "\n".join(wrong)


def test_runs_on_user_logs(user_folder, capsys):
    # the synopsis's own options, on every user-like log at once
    code, out, err = cli(["runs", "my_run.csv", "runs/", "tb_logs/", "outputs/", "--json"], capsys)
    assert code == 0, err
    runs = {r["run_id"] for r in json.loads(out)["runs"]}
    assert runs == {"my_run", "verl_qwen7b", "tb_logs", "outputs"}


def test_stop_and_forecast_on_user_logs(user_folder, capsys):
    stop_line = next(c for c in _commands_in_readme() if c.startswith("bayesgrpo stop LOGS"))
    # the synopsis as written, its optional parts left out: on the plain CSV without metadata
    required = re.sub(r"\[[^\]]*\]", "", stop_line).split()
    argv = [w if w != "LOGS" else "my_run.csv" for w in required[1:]]
    code, out, err = cli([*argv, "--json"], capsys)
    assert code == 0, err
    (answer,) = json.loads(out)
    assert answer["run_id"] == "my_run" and answer["horizon_step"] == 1000
    assert answer["decision"] in {"stop", "continue", "undecided"} and answer["band"] == "predictive"
    # the horizon the logs state: trainer_state.json's max_steps, verl's total steps
    code, out, err = cli(["stop", "outputs/", "runs/verl_qwen7b.log", "--json"], capsys)
    assert code == 0, err
    horizons = {r["run_id"]: r["horizon_step"] for r in json.loads(out)}
    assert horizons == {"outputs": 500, "verl_qwen7b": 200}


@pytest.mark.slow
def test_forecast_on_a_plain_csv(user_folder, capsys):
    """``bayesgrpo forecast`` on the plain CSV alone: no metadata, a horizon, the predictive band named."""
    code, out, err = cli(
        ["forecast", "my_run.csv", "--horizon", "200", "--draws", "60", "--tune", "60", "--output", "fc"],
        capsys,
    )
    assert code == 0, err
    assert "90% predictive" in out and "200" in out
    assert (user_folder / "fc" / "forecast.png").exists()


def test_diagnose_on_user_logs(user_folder, capsys):
    code, out, err = cli(["diagnose", "my_run.csv", "runs/", "--min-severity", "warning", "--json"], capsys)
    assert code == 0, err
    assert isinstance(json.loads(out), list)  # findings; a smooth run raises none


@pytest.mark.slow
def test_watch_block(user_folder, capsys):
    """Each ``bayesgrpo watch`` line of the README, for one poll (``--once`` added where absent)."""
    text = block("bayesgrpo watch train.log").text
    lines = [line.split("#", 1)[0].strip() for line in text.splitlines() if line.strip()]
    assert len(lines) >= 5
    for line in lines:
        argv = shlex.split(line)[1:]
        if "--once" not in argv:
            argv.append("--once")
        code, out, err = cli(argv, capsys)
        assert code == 0, f"{line}: {err}"
        assert out.strip(), line
        if "--json" in argv:
            assert json.loads(out.splitlines()[0])["runs"]
        else:
            assert "error" not in out.lower(), f"{line}:\n{out}"


# ------------------------------------------------------------------------------------------------
# python blocks


def test_reading_logs_block(user_folder, capsys):
    namespace = block('table = bayesgrpo.load_runs(["runs/verl_qwen7b.log"').run({})
    table = namespace["table"]
    assert sorted(table.run_ids) == ["outputs", "tb_logs", "verl_qwen7b"]
    qwen = table.runs.set_index("run_id").loc["verl_qwen7b"]
    assert qwen["family"] == "qwen2.5" and qwen["size_b"] == 7
    assert "read" in capsys.readouterr().out  # print(table.report)


def test_writers_block(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    table = block("write_trainer_state(").run({})["table"]
    assert sorted(table.run_ids) == ["grpo-qwen", "verl_qwen"]
    assert table.runs["total_steps"].tolist() == [200.0, 200.0]
    assert len(table.points) == 200
    assert table.points.groupby("run_id")["reward"].last().round(3).tolist() == [0.771, 0.771]


@pytest.fixture
def shrunk_sampling(monkeypatch: pytest.MonkeyPatch) -> None:
    """``RewardModel.fit`` with few draws: the walkthrough checks that the API works, not the fit."""
    fit = RewardModel.fit

    def few_draws(self: RewardModel, runs: Any, **kwargs: Any) -> RewardModel:
        kwargs.setdefault("draws", 100)
        kwargs.setdefault("tune", 150)
        kwargs.setdefault("random_seed", 1)
        return fit(self, runs, **{**kwargs, "progressbar": False})

    monkeypatch.setattr(RewardModel, "fit", few_draws)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::bayesgrpo.errors.FitWarning")  # 100 draws do not mix: not the point
def test_python_walkthrough_on_bundled_and_user_logs(user_folder, shrunk_sampling, capsys):
    """Forecasting, stopping, the live update and transfer, in the README's order, one namespace."""
    namespace: dict[str, Any] = {}
    block("model = bayesgrpo.RewardModel(").run(namespace)
    final = namespace["model"].final_reward()
    assert len(final) == 60 and (final["q05"] <= final["q95"]).all()
    assert (user_folder / "model.nc").exists() and (user_folder / "model.live.npz").exists()

    block("steps_to_fraction(draws").run(namespace)
    decision = namespace["PlateauRule"](eps=0.01, prob=0.9, relative=True).decide(
        namespace["draws"], step_now=namespace["now"]
    )
    assert len(decision) == 60

    namespace["my_run_table"] = namespace["bayesgrpo"].load_runs(["my_run.csv"])  # a plain CSV
    block("live = bayesgrpo.LiveForecaster(").run(namespace)
    update = namespace["update"]
    assert namespace["live"].population._unread is not None  # read from its live summary alone
    quantiles = update.quantiles([500, 1000])
    assert list(quantiles["step"]) == [500, 1000]
    assert update.method in {"importance", "ensemble_mcmc"}

    transfer = block("predict_new_run(population, new_run").run(namespace)
    ahead = transfer["predict_new_run"](transfer["population"], transfer["new_run"], horizon=500)
    assert ahead.table["step"].iloc[-1] == 500 and np.allclose(
        ahead.table["step"], ahead.table["step"].round()
    )

    report = block("bayesgrpo report logs/").text.replace("\\\n", " ")
    code, out, err = cli(shlex.split(report)[1:], capsys)
    assert code == 0, err
    html = (user_folder / "report.html").read_text()
    assert "my_run" in html and "verl_qwen7b" in html and "7B" in html


# ------------------------------------------------------------------------------------------------
# the training-loop blocks


def _grpo_config_call(tree: ast.Module) -> ast.Call:
    (call,) = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "GRPOConfig"
    ]
    return call


class _ReplaceCall(ast.NodeTransformer):
    def __init__(self, target: ast.Call, name: str) -> None:
        self.target, self.name = target, name

    def visit_Call(self, node: ast.Call) -> ast.AST:
        if node is self.target:
            return ast.copy_location(ast.Name(self.name, ast.Load()), node)
        return self.generic_visit(node)


def _tiny_causal_lm(folder: Path) -> str:
    """A random one-layer GPT-2 with a word-level tokenizer, saved as a model folder (CPU, seconds)."""
    from transformers import GPT2LMHeadModel

    tokenizer, config = tiny_gpt2()
    GPT2LMHeadModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::FutureWarning")  # transformers 5 renames gradient_checkpointing
def test_trl_callback_block(tmp_path, monkeypatch):
    """The README's GRPOTrainer block with a real TRL trainer on the CPU.

    Replaced: the ``GRPOConfig(...)`` call (2,000 steps of a real model) by the same arguments with
    12 steps of a tiny model on the CPU, logged every step; the arguments it shows are checked
    against ``GRPOConfig`` first. ``model``, ``reward_fn`` and ``dataset`` are the user's own.
    """
    pytest.importorskip("trl")
    from datasets import Dataset
    from trl import GRPOConfig

    monkeypatch.chdir(tmp_path)
    source = block("BayesStopCallback(").text
    tree = ast.parse(source)
    call = _grpo_config_call(tree)
    shown = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
    inspect.signature(GRPOConfig).bind(**shown)  # the README's arguments are GRPOConfig's
    tiny = {
        **shown,
        "max_steps": 12,
        "logging_steps": 1,
        "per_device_train_batch_size": 4,
        "num_generations": 4,
        "max_completion_length": 6,
        "save_strategy": "no",
        "disable_tqdm": True,
        "use_cpu": True,
        "gradient_checkpointing": False,
        "seed": 0,
    }
    tree = ast.fix_missing_locations(_ReplaceCall(call, "tiny_cpu_args").visit(tree))

    def reward_fn(completions: list[str], **_: Any) -> list[float]:
        return [min(len(c.split()) / 6.0, 1.0) for c in completions]

    namespace: dict[str, Any] = {
        "model": _tiny_causal_lm(tmp_path / "tiny-gpt2"),
        "reward_fn": reward_fn,
        "dataset": Dataset.from_dict(
            {"prompt": [" ".join(f"w{(i + j) % 13}" for j in range(3)) for i in range(48)]}
        ),
        "tiny_cpu_args": GRPOConfig(**tiny),
    }
    exec(compile(tree, str(README), "exec"), namespace)
    callback = namespace["callback"]
    assert callback.failures == 0, callback.last_error
    assert callback.last_decision is not None and "P(gain" in callback.last_decision.reason
    history = callback.history_frame()
    assert len(history) >= 2 and "range_note" in history.columns
    assert (tmp_path / "out").exists()  # output_dir as the README gives it
    logged = [e for e in namespace["trainer"].state.log_history if "bayesgrpo/p_plateau" in e]
    assert logged and "bayesgrpo/forecast_final_predictive_low" in logged[-1]


def test_verl_block(monkeypatch):
    """The README's verl recipe, run against verl's trainer API as far as the recipe touches it.

    verl needs GPUs and cannot be installed here. Replaced: the module ``verl.trainer.ppo.v1``, by
    a ``PPOTrainerSync`` that holds a config, a step count and verl's ``Tracking`` (the fakes of
    ``tests/integrations/test_verl.py``) and a ``register_trainer`` registry. The recipe's class is
    registered, begins training, and is fed the metrics a real verl run logged, in verl's loop.
    """
    registry: dict[str, type] = {}

    def register_trainer(name: str):
        def add(cls: type) -> type:
            registry[name] = cls
            return cls

        return add

    class PPOTrainerSync:
        def __init__(self, config: dict[str, Any], total_training_steps: int) -> None:
            self.config, self.total_training_steps = config, total_training_steps
            self.logger = FakeTracking("project", "experiment")
            self.began = False

        def on_train_begin(self) -> None:
            self.began = True

    v1 = types.ModuleType("verl.trainer.ppo.v1")
    v1.PPOTrainerSync, v1.register_trainer = PPOTrainerSync, register_trainer  # type: ignore[attr-defined]
    for name in ("verl", "verl.trainer", "verl.trainer.ppo"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "verl.trainer.ppo.v1", v1)

    namespace = block("@register_trainer").run({"__name__": "my_verl_main"})
    trainer_class = registry["sync_bayesgrpo"]
    assert trainer_class is namespace["BayesStopTrainer"]
    config = {
        "data": {"train_batch_size": 1024},
        "actor_rollout_ref": {"rollout": {"n": 5}, "model": {"path": "Qwen/Qwen2-7B-Instruct"}},
        "trainer": {"experiment_name": "qwen2_7b_gpg", "total_training_steps": 105},
    }
    trainer = trainer_class(config, total_training_steps=105)
    trainer.on_train_begin()
    assert trainer.began
    (hook,) = trainer.logger.logger.values()
    done, _ = fake_fit(trainer, trainer.logger, dict(verl_metrics()))
    assert hook.last_decision is not None, "the hook decided nothing over a real run's 105 steps"
    assert done[-1] == trainer.total_training_steps  # a stop ends the loop after one more step


@pytest.mark.slow
def test_optuna_block(tmp_path, monkeypatch):
    """The README's Optuna study on SQLite, with ``train_grpo`` a user's training loop: a noisy
    saturating reward whose level depends on the learning rate (best near 1e-6).
    """
    monkeypatch.chdir(tmp_path)

    def train_grpo(lr: float, max_steps: int) -> Iterator[tuple[int, float]]:
        rng = np.random.default_rng(int(lr * 1e9))
        level = 0.85 - 0.25 * abs(np.log10(lr) + 6.0)  # best at lr = 1e-6
        for step in range(1, max_steps + 1):
            yield step, float(0.2 + (level - 0.2) * (1 - np.exp(-step / 60)) + rng.normal(0, 0.03))

    namespace = block("RewardCurvePruner(").run({"train_grpo": train_grpo})
    study = namespace["study"]
    states = [t.state.name for t in study.trials]
    assert len(states) == 20 and "PRUNED" in states and "COMPLETE" in states
    assert all(t.user_attrs.get("bayesgrpo:decision") for t in study.trials[5:])
    pruned = [t for t in study.trials if t.state.name == "PRUNED"]
    assert all("P(final value beats the best" in t.user_attrs["bayesgrpo:reason"] for t in pruned)
    assert (tmp_path / "grpo.db").exists()


def test_mlflow_block(tmp_path, monkeypatch):
    """The README's MLflow block on a local store holding two real bundled runs."""
    monkeypatch.chdir(tmp_path)
    client = MlflowClient(tracking_uri="sqlite:///mlflow.db")
    experiment = client.create_experiment("grpo-sweep")
    bundled = load_bundled(warn=False)
    for name, run_id in (
        ("lr-1e-6", "verl_asyncRA_q3b_fsdp_base"),
        ("lr-3e-6", "verl_asyncRA_q3b_fsdp_off_ppl"),
    ):
        run = client.create_run(experiment, run_name=name)
        points = bundled.run(run_id).dropna(subset=["reward"])
        metrics = [
            Metric("reward", float(r), 1000 + int(s), int(s))
            for s, r in zip(points["step"], points["reward"], strict=True)
        ]
        client.log_batch(run.info.run_id, metrics=metrics)
    namespace = block('load_runs(["mlflow:sqlite:///mlflow.db#grpo-sweep"])').run({"bayesgrpo": bayesgrpo})
    assert sorted(namespace["table"].run_ids) == ["lr-1e-6", "lr-3e-6"]
    assert namespace["run"].run_ids == ["lr-1e-6"]


@pytest.mark.slow
def test_wandb_offline_block(tmp_path, monkeypatch):
    """The README's W&B block on what a real ``wandb.init(mode="offline")`` leaves in ``wandb/``."""
    monkeypatch.chdir(tmp_path)
    code = (
        "import math, wandb\n"
        "for name in ('lr-1e-6', 'lr-3e-6'):\n"
        "    run = wandb.init(mode='offline', project='grpo', name=name, config={'max_steps': 40})\n"
        "    for step in range(1, 41):\n"
        "        wandb.log({'train/reward': 0.2 + 0.5 * (1 - math.exp(-step / 10))}, step=step)\n"
        "    run.finish()\n"
    )
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true", "WANDB_DIR": str(tmp_path)}
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=300)
    table = block('load_runs(["wandb/"])').run({"bayesgrpo": bayesgrpo})["table"]
    assert sorted(table.run_ids) == ["lr-1e-6", "lr-3e-6"]
    assert table.runs["total_steps"].tolist() == [40.0, 40.0]
