#!/usr/bin/env python3
"""ctest docs.*: the user docs cannot drift from the tools.

  docs_test.py flags BIN_DIR     every flag each tool's --help lists appears on its page under docs/
                                 (the same parse of CLI11's help as FlagsOfEveryToolAreInTheTable)
  docs_test.py links             every relative link of README.md, CHANGELOG.md and docs/ resolves,
                                 anchors included (GitHub's heading slugs)
  docs_test.py examples BIN_DIR  the shell blocks marked <!-- runnable --> run, in order, one shell per
                                 file, in a temporary folder with BIN_DIR first on PATH

Each failure says which file and what to add or fix.
"""
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# tool (as typed) -> its page
TOOLS = {
    "dsrun": "docs/dsrun.md",
    "dsdiag": "docs/dsdiag.md",
    "dsdiag hang": "docs/hangs.md",
    "dsbench world": "docs/dsbench.md",
    "dsbench coll": "docs/dsbench.md",
    "dsbench train": "docs/dsbench.md",
    "dsbench gpu": "docs/dsbench.md",
    "dsreport html": "docs/dsreport.md",
    "dsreport compare": "docs/dsreport.md",
    "dsreport ingest": "docs/dsreport.md",
    "dsreport import": "docs/dsreport.md",
    "dsreport dashboard": "docs/dsreport.md",
    "dsreport export": "docs/dsreport.md",
    "dsreport baseline": "docs/dsreport.md",
    "dsreport check": "docs/dsreport.md",
}
ALWAYS = {"--help", "--version", "--help-all"}
LONG_FLAG = re.compile(r"(?:^|[ ,])(--[a-zA-Z][a-zA-Z0-9_-]*)")


def help_flags(bin_dir, tool):
    """The option lines of `tool --help`: a list of (spellings, the line)."""
    words = tool.split()
    argv = [os.path.join(bin_dir, words[0])] + words[1:] + ["--help"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise SystemExit(f"FAIL: `{tool} --help` exited {out.returncode}: {out.stderr.strip()}")
    result, in_options = [], False
    for line in out.stdout.splitlines():
        if line.startswith("Options:"):
            in_options = True
        if line.startswith("Subcommands:") or line.startswith("Positionals:"):
            in_options = False
        if not in_options or len(line) < 3 or line[:2] != "  " or line[2] == " ":
            continue
        names = line[2:].split("  ")[0]
        flags = [m.group(1) for m in LONG_FLAG.finditer(names)]
        if flags and not any(f in ALWAYS for f in flags):
            result.append((flags, line.strip()))
    return result


def on_page(text, flag):
    return re.search(r"(?<![\w-])" + re.escape(flag) + r"(?![\w-])", text) is not None


def check_flags(bin_dir):
    missing = []
    count = 0
    for tool, page in TOOLS.items():
        path = os.path.join(ROOT, page)
        if not os.path.exists(path):
            missing.append(f"{page} does not exist; it documents `{tool}`")
            continue
        text = open(path, encoding="utf-8").read()
        for flags, line in help_flags(bin_dir, tool):
            count += 1
            if not any(on_page(text, f) for f in flags):
                missing.append(f"{page} lacks {flags[0]} of `{tool}` (its --help: \"{line[:100]}\"): "
                               f"add a row for {flags[0]} to the flags of {page}")
    for m in missing:
        print("FAIL: " + m)
    print(f"docs flags: {count} flags of {len(TOOLS)} tools checked, {len(missing)} missing")
    return not missing


def slug(heading):
    """GitHub's anchor of a heading."""
    h = heading.strip().lower()
    h = re.sub(r"[^\w\- ]", "", h)
    return h.replace(" ", "-")


def anchors(path):
    result, fence = set(), False
    seen = {}
    for line in open(path, encoding="utf-8"):
        if line.startswith("```"):
            fence = not fence
        m = None if fence else re.match(r"^#{1,6} (.*)$", line)
        if m:
            s = slug(m.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            result.add(s if n == 0 else f"{s}-{n}")
    return result


def markdown_files():
    files = [os.path.join(ROOT, "README.md"), os.path.join(ROOT, "CHANGELOG.md")]
    for d, _, names in os.walk(os.path.join(ROOT, "docs")):
        files += [os.path.join(d, n) for n in sorted(names) if n.endswith(".md")]
    return [f for f in files if os.path.exists(f)]


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def check_links():
    bad, count = [], 0
    for f in markdown_files():
        rel = os.path.relpath(f, ROOT)
        fence = False
        for n, line in enumerate(open(f, encoding="utf-8"), 1):
            if line.startswith("```"):
                fence = not fence
            if fence:
                continue
            for target in LINK.findall(line):
                if re.match(r"^[a-z]+:", target):
                    continue
                count += 1
                path, _, anchor = target.partition("#")
                dest = f if not path else os.path.normpath(os.path.join(os.path.dirname(f), path))
                if not os.path.exists(dest):
                    bad.append(f"{rel}:{n}: the link {target} points at {os.path.relpath(dest, ROOT)}, which does not exist")
                elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                    bad.append(f"{rel}:{n}: the link {target}: {os.path.relpath(dest, ROOT)} has no heading with the anchor #{anchor}")
    for b in bad:
        print("FAIL: " + b)
    print(f"docs links: {count} relative links checked, {len(bad)} broken")
    return not bad


def runnable_blocks(path):
    """The ```sh blocks right after a <!-- runnable --> line (blank lines between are allowed)."""
    blocks, marked, inside, cur, start = [], False, False, [], 0
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        s = line.rstrip("\n")
        if inside:
            if s.startswith("```"):
                blocks.append((start, "\n".join(cur)))
                inside, cur = False, []
            else:
                cur.append(s)
        elif s.strip() == "<!-- runnable -->":
            marked = True
        elif marked and s.startswith("```"):
            inside, marked, start = True, False, n
        elif s.strip():
            marked = False
    return blocks


def check_examples(bin_dir):
    ok, total = True, 0
    env = dict(os.environ, PATH=os.path.abspath(bin_dir) + os.pathsep + os.environ.get("PATH", ""))
    env.setdefault("OMP_NUM_THREADS", "1")
    for f in markdown_files():
        blocks = runnable_blocks(f)
        if not blocks:
            continue
        rel = os.path.relpath(f, ROOT)
        with tempfile.TemporaryDirectory(prefix="ds_docs_examples.") as tmp:
            for line, code in blocks:
                total += 1
                r = subprocess.run(["bash", "-e", "-c", code], cwd=tmp, env=env, capture_output=True, text=True,
                                   timeout=600)
                if r.returncode != 0:
                    ok = False
                    print(f"FAIL: {rel}:{line}: the runnable example exited {r.returncode}:\n{code}\n"
                          f"--- its output (last lines):\n{(r.stdout + r.stderr)[-3000:]}")
                else:
                    print(f"ok: {rel}:{line}")
    print(f"docs examples: {total} runnable blocks")
    return ok and total > 0


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode == "flags" and len(sys.argv) == 3:
        sys.exit(0 if check_flags(sys.argv[2]) else 1)
    if mode == "links":
        sys.exit(0 if check_links() else 1)
    if mode == "examples" and len(sys.argv) == 3:
        sys.exit(0 if check_examples(sys.argv[2]) else 1)
    print(__doc__)
    sys.exit(2)
