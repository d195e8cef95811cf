"""A compromised engine reaches nothing but its own socket (issue 19, ADR 0028).

QuickJS is C: an exploit turns the model's JavaScript into native code in the process that
runs it. These tests run attacker code there, at the moment model code enters QuickJS,
without changing the product: a throwaway virtual environment (this project's packages
added by a ``.pth``) preloads ``containment_attack.py``, which wraps the engine binding.
The server runs ``CodeMode`` with its default runtime in that interpreter, with a secret in
its environment, a project directory and a home directory of its own; the test listens on
127.0.0.1. Every capability an exploit would use is probed, one result each, and the
processes below the server are inspected while runs are in flight.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="worker processes are Linux-only")

HANG_GUARD_S = 300
SECRET = "s3cr3t-token-of-the-server-7f3a"
PROBES = (
    "env_secret",
    "server_environ",
    "server_mem",
    "ptrace_server",
    "pidfd_open_server",
    "pidfd_getfd_server",
    "signal_server",
    "stop_server",
    "signal_sibling",
    "signal_parent",
    "connect",
    "read_home",
    "read_project",
    "write_project",
    "fork",
    "thread",
    "spin_unbounded",
    "execve",
)

SERVER = textwrap.dedent(
    """
    import asyncio, base64, json, os, sys
    from codemodekit import CodeMode, ProcessSandbox, allow_all_tool_calls, define_tool, local

    def below(root):
        # Every process whose chain of parents reaches root.
        parents = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat") as stat:
                        parents[int(entry)] = int(stat.read().rsplit(")", 1)[1].split()[1])
                except OSError:
                    pass
        found = []
        for pid in parents:
            p = pid
            while p in parents and p != root and p > 1:
                p = parents[p]
            if p == root and pid != root:
                found.append(pid)
        return found

    def status(pid):
        fields = {}
        try:
            with open(f"/proc/{pid}/status") as lines:
                for line in lines:
                    key, _, value = line.partition(":")
                    fields[key] = value.strip()
        except OSError:
            return None
        return {k: fields.get(k) for k in ("Name", "NoNewPrivs", "Seccomp", "State")}

    async def until_gone(pid):
        for _ in range(6000):
            st = status(pid)
            if st is None or st["State"].startswith("Z"):
                return True
            await asyncio.sleep(0.01)
        return False

    async def main():
        params = json.loads(sys.argv[1])
        held, release = asyncio.Event(), asyncio.Event()

        async def hold(args):
            held.set()
            await release.wait()
            return {}

        tools = local("app", {"hold": define_tool(
            description="hold", input_schema={"type": "object"}, execute=hold)})
        box = ProcessSandbox()  # the default runtime's shared pool
        async with CodeMode(sources=[tools], policy=allow_all_tool_calls(), sandbox=box) as cm:
            sibling = asyncio.ensure_future(cm.run("await tools.app.hold({}); return 'sibling';"))
            await held.wait()
            (sibling_pid,) = box.busy_pids()
            params.update(server=os.getpid(), sibling=sibling_pid)
            blob = base64.b64encode(json.dumps(params).encode()).decode()
            code = f'const found: string = "__PROBE__{blob}__END__";\\nreturn found;'
            runs = []
            for _ in range(RUNS):
                result = await cm.run(code)
                value = result.value if result.ok else None
                if isinstance(value, str) and value.startswith("__RESULT__"):
                    value = json.loads(base64.b64decode(value[len("__RESULT__"):]))
                else:
                    value = {"failed": repr(result.diagnostic)}
                runs.append(value)
            # A compromised worker offers the compile cache a program of its own, on a
            # source's first run and on a run of its cached program.
            blob = base64.b64encode(json.dumps({"poison": True}).encode()).decode()
            poison = f'const found: string = "__PROBE__{blob}__END__";\\nreturn found;'
            poisoned = []
            for _ in range(3):
                result = await cm.run(poison)
                poisoned.append(result.value if result.ok else result.diagnostic.code)
            # Every process below the server while a run is in flight.
            processes = {pid: status(pid) for pid in below(os.getpid())}
            release.set()
            assert (await sibling).value == "sibling"
            gone = {}
            for run in runs:
                if "pid" in run:
                    gone[run["pid"]] = await until_gone(run["pid"])
            gone[sibling_pid] = await until_gone(sibling_pid)
            stats = cm.runtime_stats()
        print(json.dumps({
            "runs": runs,
            "processes": processes,
            "gone_after_run": gone,
            "poisoned": poisoned,
            "containment": dict(getattr(stats, "containment", ())),
        }))

    RUNS = 4  # more than the warm workers: a reused worker would host a second one
    asyncio.run(main())
    """
)


def _throwaway_python(tmp_path: Path, *, shadow_seccomp: bool = False) -> Path:
    """A virtual environment whose interpreter starts with the attacker module loaded and
    this project's packages importable (through ``site.addsitedir``, so their ``.pth``
    files, an editable install's included, are processed too)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site_dir = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    ours = [p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()]
    import codemodekit

    src = str(Path(codemodekit.__file__).resolve().parent.parent)
    lines = [f"import site; site.addsitedir({p!r})" for p in ours]
    (site_dir / "aa_project.pth").write_text("\n".join([*lines, src, ""]))
    attack = Path(__file__).with_name("containment_attack.py").read_text()
    (site_dir / "containment_attack.py").write_text(attack)
    (site_dir / "zz_attack.pth").write_text("import containment_attack\n")
    if shadow_seccomp:
        # A machine without libseccomp: the binding cannot be imported.
        (site_dir / "pyseccomp.py").write_text("raise ImportError('no libseccomp here')\n")
    return python


@contextlib.contextmanager
def _listening() -> Iterator[tuple[int, list[Any]]]:
    """A TCP listener on 127.0.0.1 that counts the connections it accepts."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    accepted: list[Any] = []

    def accept() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            accepted.append(conn)

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield server.getsockname()[1], accepted
    finally:
        server.close()
        for conn in accepted:
            conn.close()


@pytest.fixture(scope="module")
def attack(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One server run with every probe (the throwaway environment costs seconds)."""
    tmp_path = tmp_path_factory.mktemp("containment")
    python = _throwaway_python(tmp_path)
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    (home / ".netrc").write_text("machine example.com password hunter2\n")
    (project / "tools.py").write_text("def ping() -> str:\n    return 'pong'\n")
    server_script = project / "server.py"
    server_script.write_text(SERVER)
    with _listening() as (port, accepted):
        params = {
            "secret": SECRET,
            "port": port,
            "home_file": str(home / ".netrc"),
            "project_file": str(project / "tools.py"),
            "write_file": str(project / "injected_tools.py"),
        }
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),
            "CODEMODE_TEST_SECRET": SECRET,
        }
        done = subprocess.run(
            [str(python), str(server_script), json.dumps(params)],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=HANG_GUARD_S,
        )
        assert done.returncode == 0, done.stderr[-4000:]
        report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        report["connections"] = len(accepted)
    report["written"] = (project / "injected_tools.py").exists()
    return report


@pytest.mark.parametrize("capability", PROBES)
def test_the_process_that_runs_model_code_cannot(attack: dict[str, Any], capability: str) -> None:
    for run in attack["runs"]:
        assert "failed" not in run, run
        assert run[capability].startswith("denied"), (capability, run[capability])


def test_no_network_connection_and_no_file_was_written(attack: dict[str, Any]) -> None:
    assert attack["connections"] == 0
    assert attack["written"] is False


def test_each_run_has_a_process_of_its_own(attack: dict[str, Any]) -> None:
    runs = attack["runs"]
    assert len({run["pid"] for run in runs}) == len(runs) == 4
    assert [run["runs_in_this_process"] for run in runs] == [1] * len(runs)


def test_a_compromised_worker_cannot_fill_the_compile_cache(attack: dict[str, Any]) -> None:
    """ADR 0028: only the program a worker sends before model code runs is cached; a frame
    offering one afterwards ends that worker's run, and no run ever runs the forged one."""
    assert attack["poisoned"] == ["INTERNAL_ERROR"] * 3, attack["poisoned"]


def test_a_worker_does_not_outlive_its_run(attack: dict[str, Any]) -> None:
    assert attack["gone_after_run"]
    assert all(attack["gone_after_run"].values()), attack["gone_after_run"]


def test_every_process_below_the_server_is_locked_down_while_runs_are_in_flight(
    attack: dict[str, Any],
) -> None:
    processes = attack["processes"]
    names = {p["Name"] for p in processes.values() if p is not None}
    assert {"codemode-zygote", "codemode-worker"} <= names, processes
    for pid, status in processes.items():
        if status is None:  # exited between the listing and the read
            continue
        assert status["NoNewPrivs"] == "1", (pid, status)
        assert status["Seccomp"] == "2", (pid, status)


def test_runtime_stats_say_which_layers_are_in_force(attack: dict[str, Any]) -> None:
    layers = attack["containment"]
    for mandatory in ("clean-environment", "single-use", "no-new-privs", "seccomp"):
        assert layers[mandatory] == "on", layers
    assert {"namespaces", "landlock", "rlimits"} <= set(layers)


def test_without_seccomp_process_mode_refuses_to_run_and_names_the_opt_out(
    tmp_path: Path,
) -> None:
    python = _throwaway_python(tmp_path, shadow_seccomp=True)
    script = textwrap.dedent(
        """
        import asyncio, logging, sys
        from codemodekit import ProcessSandbox, RuntimeOptions
        from codemodekit.sandbox.zygote import PoolFailure
        logging.disable(logging.CRITICAL)
        for options in (RuntimeOptions(), RuntimeOptions(unsafe_allow_uncontained=True)):
            box = ProcessSandbox(options, shared=False)
            try:
                print(box.containment()["seccomp"].split(" ")[0])
            except PoolFailure as refused:
                print("refused:", refused)
            box.close()
        """
    )
    done = subprocess.run(
        [str(python), "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
    )
    assert done.returncode == 0, done.stderr[-4000:]
    refused, allowed = done.stdout.strip().splitlines()
    assert refused.startswith("refused:"), refused
    assert "seccomp" in refused and "unsafe_allow_uncontained" in refused
    assert allowed == "off"
    # `codemode check` says so and fails.
    cli = "import sys; from codemodekit.cli import main; sys.exit(main(sys.argv[1:]))"
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path)}
    for argv in (["init"], ["check"]):
        done = subprocess.run(
            [str(python), "-c", cli, *argv],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=HANG_GUARD_S,
            env=env,
        )
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "seccomp" in done.stderr and "unsafe_allow_uncontained" in done.stderr
