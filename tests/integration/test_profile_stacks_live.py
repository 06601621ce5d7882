"""Profiles that explain, on the embedded PostgreSQL 18 (built without frame pointers): one short run.

The run's profile starts with a frame-pointer check, finds the stacks unusable and unwinds with DWARF; most
backend samples then reach PostgresMain at least 5 named frames deep (counted here in the folded file).
Its second step, durable single-row inserts (a planted commit flush), has backends that block in fdatasync:
the off-CPU graph shows that path and the step's sampled waits (WalSync / WALWrite) stand beside it; the
point-select step's backends wait for their client (epoll) and never flush.
The same job as a user without root (a throwaway system user, kernel.perf_event_paranoid as the machine has
it: 2 on Debian) records the embedded server's processes per process in user space, says once on the terminal
what is missing and what would enable it, and still gets the DWARF stacks.

Needs perf with cpu-clock allowed (root here): a missing or forbidden perf fails with the reason.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from collectors.profile.analyse import usable_stack
from collectors.profile.parse import load_folded
from collectors.profile.record import perf_event_paranoid
from diag.core import servers

REPO = Path(__file__).resolve().parents[2]


JOB = ["-m", "diag", "run", "embedded:postgres", "-w", "point-select", "-c", "2", "-T", "3", "--warmup", "0"]


def run_job(out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """The default job, cut to one 3 s point-select step at 2 clients on the embedded PostgreSQL."""
    return subprocess.run([sys.executable, *JOB, "--out", str(out), *extra],
                          capture_output=True, text=True, timeout=300, cwd=str(REPO))


@pytest.fixture(scope="module")
def pg_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any], str]:
    out = tmp_path_factory.mktemp("stacks") / "bundle"
    # the insert step would make the run measure F first (not what this module checks): F is given instead
    p = run_job(out, "-w", "point-select,insert", "--flush-capability", "100000")
    assert p.returncode == 0, p.stderr[-3000:]
    row = json.loads((out / "results.json").read_text())["results"][0]
    assert row["workload"] == "point-select"
    return out, row, p.stdout + p.stderr


def _offcpu(out: Path, workload: str) -> tuple[dict[str, Any], dict[str, int]]:
    row = next(r for r in json.loads((out / "results.json").read_text())["results"] if r["workload"] == workload)
    off = row["profile"]["offcpu"]
    assert "error" not in off, off
    return off, load_folded(out / off["folded"])


FLUSH = "__x64_sys_fdatasync_[k]"


def test_planted_commit_flush_shows_its_blocking_path(pg_run: tuple[Path, dict[str, Any], str]) -> None:
    out, _, _ = pg_run
    off, folded = _offcpu(out, "insert")
    backend = {s: us for s, us in folded.items() if s.startswith("backend;")}
    flush_us = sum(us for s, us in backend.items() if FLUSH in s.split(";"))
    assert flush_us > 0 and off["by_kind_call"]["backend"].get("fdatasync", 0) == flush_us
    # The flush path as the kernel walked it, under the backend: the system call, ext4, the block layer.
    path = max((s for s in backend if FLUSH in s), key=lambda s: backend[s]).split(";")
    assert path.index(FLUSH) < path.index("do_fsync_[k]") < path.index("__schedule_[k]")
    assert flush_us >= 0.05 * sum(backend.values()), off["by_kind_call"]["backend"]
    # The other direction: point-select backends wait for the client, never for a flush.
    off_ps, folded_ps = _offcpu(out, "point-select")
    assert not any(FLUSH in s for s in folded_ps if s.startswith("backend;"))
    assert off_ps["by_kind_call"]["backend"].get("epoll_wait", 0) > 0
    html = (out / "report.html").read_text()
    profiles = html.split('<h2 id="profiles">', 1)[1]
    section = profiles.split("insert &middot; 2 clients", 1)[1].split("<h3>", 1)[0]
    flame = section.split('class="flame offcpu-flame"', 1)[1]
    assert "__x64_sys_fdatasync_[k]" in flame and "µs off CPU" in flame
    waits = section.split('class="offcpu-waits"', 1)[1].split("</table>", 1)[0]
    assert "WalSync" in waits or "WALWrite" in waits, waits
    sentence = section.split('class="offcpu-joined">', 1)[1].split("</p>", 1)[0]
    assert "fdatasync (" in sentence and ("WalSync" in sentence or "WALWrite" in sentence), sentence


def test_pg18_stacks_are_deep_through_postgres_main(pg_run: tuple[Path, dict[str, Any], str]) -> None:
    out, row, _ = pg_run
    prof = row["profile"]
    assert "error" not in prof, prof
    assert prof["unwinder"] == "dwarf" and prof["stack_bytes"] == 8192, prof
    # The check beside the first window decides for later ones; on a very busy host it may see too few samples.
    reason = prof["unwinder_reason"]
    assert ("frame pointers gave" in reason and "DWARF from now on" in reason) or "too few samples" in reason, reason
    folded = load_folded(out / prof["folded"])
    backend = {s: n for s, n in folded.items() if s.startswith("backend;")}
    total = sum(backend.values())
    assert total >= 10, f"too few backend samples to judge: {total}"  # 163 in a quieter hour here, 16 at load 17
    deep = sum(n for s, n in backend.items() if "PostgresMain" in s.split(";")[2:] and len(s.split(";")) - 2 >= 5)
    assert deep > 0.5 * total, f"{deep} of {total} backend samples reach PostgresMain 5+ frames deep"
    assert sum(n for s, n in backend.items() if usable_stack(s)) > 0.5 * total
    assert prof["usable_share"] > 0.5


def test_report_says_which_unwinder_ran(pg_run: tuple[Path, dict[str, Any], str]) -> None:
    out, row, _ = pg_run
    html = (out / "report.html").read_text()
    assert "Stacks: DWARF (first window: " in html
    assert f"{100 * row['profile']['usable_share']:.0f}% of samples (" in html and ") have a usable stack" in html


@pytest.fixture(scope="module")
def nonroot_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, Any], str]]:
    """The job run by a throwaway system user without any perf privilege.

    This machine's Python lives under /root (mode 700), so the user gets CAP_DAC_READ_SEARCH as an ambient
    capability to read it: that bypasses directory permissions only; perf asks for CAP_PERFMON or
    CAP_SYS_ADMIN, which it does not have. initdb checks its own path with access(), which ignores
    capabilities, so the embedded binaries come from the copy dbdiag makes for unprivileged server users.
    """
    if os.geteuid() != 0:
        pytest.fail("this test creates a throwaway user: run it as root")
    level = perf_event_paranoid()
    if level is None or level < 2:
        pytest.fail(f"kernel.perf_event_paranoid is {level}: this test needs the Debian default (2) to show "
                    "the fallback")
    bindir = servers.find_pg_bindir()  # as root: the copy reachable by unprivileged users
    user = f"dbdiagnp{os.getpid()}"
    subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", user],
                   check=True, capture_output=True)
    try:
        home = tmp_path_factory.mktemp("nonroot")
        shutil.chown(home, user, user)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "DBDIAG_PG_BINDIR": str(bindir)}
        p = subprocess.run(["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups",
                            "--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search",
                            sys.executable, *JOB, "--out", str(home / "bundle")],
                           capture_output=True, text=True, timeout=300, cwd=str(REPO), env=env)
        assert p.returncode == 0, p.stderr[-3000:]
        out = home / "bundle"
        row = json.loads((out / "results.json").read_text())["results"][0]
        yield out, row, p.stdout + p.stderr
    finally:
        subprocess.run(["userdel", user], capture_output=True)


def test_nonroot_profiles_the_servers_it_owns(nonroot_run: tuple[Path, dict[str, Any], str]) -> None:
    out, row, terminal = nonroot_run
    assert (out / "run.json").stat().st_uid != 0  # really written by the other user
    prof = row["profile"]
    assert "error" not in prof, prof
    assert prof["scope"] == "pids" and prof["unwinder"] == "dwarf"
    folded = load_folded(out / prof["folded"])
    backend = {s: n for s, n in folded.items() if s.startswith("backend;")}
    total = sum(backend.values())
    assert total >= 10, f"too few backend samples: {total}"
    assert not any(f.endswith("_[k]") for s in folded for f in s.split(";"))  # user space only
    deep = sum(n for s, n in backend.items() if "PostgresMain" in s.split(";")[2:] and len(s.split(";")) - 2 >= 5)
    assert deep > 0.5 * total, f"{deep} of {total}"
    # Said once on the terminal, with the sysctl and the capability, and kept in run.json for the report.
    notes = [ln for ln in terminal.splitlines() if "system-wide recording refused" in ln]
    assert len(notes) == 1 and "kernel.perf_event_paranoid=-1" in notes[0] and "CAP_PERFMON" in notes[0], notes
    probe = json.loads((out / "run.json").read_text())["collectors"]["profile"]
    assert probe["ok"] and any("CAP_PERFMON" in m for m in probe["missing"])
    html = (out / "report.html").read_text()
    assert "per process, user space only" in html and "system-wide recording refused" in html


# ------------------------------------------------------------------------------------------- in a browser

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--enable-logging=stderr",
                  "--v=0", "--allow-file-access-from-files", "--virtual-time-budget=5000"]
# A test-only wrapper: the report ships no script, so a page beside it loads it in a frame and writes the
# laid-out sizes of its flame graphs into its own DOM, which --dump-dom prints.
MEASURE = """<!DOCTYPE html><html><body><iframe id="f" src="%s" style="width:1150px;height:900px"></iframe>
<pre id="out"></pre><script>
document.getElementById('f').addEventListener('load', function () {
  var d = this.contentDocument, rows = [];
  d.querySelectorAll('div.flame').forEach(function (div) {
    var r = div.getBoundingClientRect(), g = div.querySelector('svg');
    var s = g ? g.getBoundingClientRect() : {width: 0, height: 0};
    rows.push([div.className, Math.round(r.width), Math.round(r.height),
               Math.round(s.width), Math.round(s.height)].join(' '));
  });
  document.getElementById('out').textContent = rows.join('\\n');
});
</script></body></html>"""


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        pytest.fail("chromium is not installed: apt-get install -y chromium")
    return exe


def _dump(url: str, tmp: Path) -> tuple[str, list[str]]:
    """The DOM after load and the page's console lines (errors and logs)."""
    p = subprocess.run([_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={tmp / 'chromium'}", "--dump-dom", url],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout, [ln for ln in p.stderr.splitlines() if ":CONSOLE" in ln]


def _flame_sizes(page: Path, tmp: Path) -> list[tuple[str, int, int, int, int]]:
    wrapper = tmp / f"measure-{page.stem}.html"
    wrapper.write_text(MEASURE % page.as_uri())
    dom, console = _dump(wrapper.as_uri(), tmp)
    assert console == [], console
    out = dom.split('<pre id="out">', 1)[1].split("</pre>", 1)[0].strip()
    rows = []
    for line in out.splitlines():
        *cls, w, h, sw, sh = line.split()
        rows.append((" ".join(cls), int(w), int(h), int(sw), int(sh)))
    return rows


def test_report_and_compare_page_in_chromium(pg_run: tuple[Path, dict[str, Any], str],
                                              nonroot_run: tuple[Path, dict[str, Any], str],
                                              tmp_path: Path) -> None:
    out, _, _ = pg_run
    sizes = _flame_sizes(out / "report.html", tmp_path)  # the report's own console lines count too
    # Two steps: a CPU and an off-CPU graph each, beside their tables, height capped at 640 px (scrolls inside);
    # the graph itself may be taller (up to 64 frames + kind, program and root: 1,116 px).
    assert len(sizes) == 4, sizes
    for cls, w, h, sw, sh in sizes:
        assert 300 <= w <= 800 and 100 <= h <= 640 + 2 and sw == 760 and sh > 100, (cls, w, h, sw, sh)  # + border
    # dbdiag compare of the two runs (same workload and clients): a differential flame graph on its page.
    page = tmp_path / "compare.html"
    p = subprocess.run([sys.executable, "-m", "diag", "compare", str(out), str(nonroot_run[0]),
                        "--html", str(page)], capture_output=True, text=True, timeout=120, cwd=str(REPO))
    assert p.returncode == 0, p.stderr[-2000:]
    html = page.read_text()
    assert 'class="flame diff-flame"' in html and "CPU per transaction:" in html
    diff = [s for s in _flame_sizes(page, tmp_path) if "diff-flame" in s[0]]
    assert len(diff) == 1 and diff[0][3] == 1060 and diff[0][4] > 100, diff


def test_interactive_flame_graph_zooms_and_searches(pg_run: tuple[Path, dict[str, Any], str],
                                                    tmp_path: Path) -> None:
    out, row, _ = pg_run
    page = out / row["profile"]["folded"].replace(".folded", ".flame.html")
    assert page.exists() and f'href="{page.relative_to(out)}"' in (out / "report.html").read_text()
    dom, console = _dump(page.as_uri() + "#search=PostgresMain&zoom=PostgresMain", tmp_path)
    assert console == [], console
    zoomed = dom.split('data-zoomed="yes"', 1)[1].split("</g>", 1)[0]
    assert "<title>PostgresMain (" in zoomed and 'width="1179.50"' in zoomed  # the clicked frame fills the width
    assert 'display: none;' in dom  # frames outside it are hidden
    assert 'data-match="yes"' in dom and "frames match" in dom
