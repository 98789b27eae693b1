#!/usr/bin/env python3
"""The README and docs/cli.md work as written.

    test-readme.py SOURCE_DIR BUILD_DIR

Runs every command shown as `$ command` in README.md and docs/cli.md, in
order, in a scratch folder that has `build` (a link to the real one) and
the README's example program as example.c; commands that run the
project's scripts/ run in the source folder.  `meson install`
goes to a staging folder (DESTDIR, which meson honours) that pkg-config
(PKG_CONFIG_SYSROOT_DIR, PKG_CONFIG_LIBDIR) and the dynamic loader
(LD_LIBRARY_PATH) are pointed at, and `ldconfig` is a no-op there: the
commands themselves are run exactly as written.  A command must exit with
status 0, or 1 with the error the document shows after it; the commands
that name NVRTC may also fail with an error naming NVRTC where libnvrtc is
missing.  Printed results shown in the documents (lines after a command
that start with '[') must be what the command prints.

Then the staged install is checked: smelt.pc, headers, libsmelt.a, and
(when built: setup found a position-independent TinyCC) libsmelt.so.0
exporting only smelt_* symbols; the example is linked against it.
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

SRC, BUILD = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
from checks import check, done  # noqa: E402 (tests/checks.py)


def blocks(path):
    """(language, lines) of each fenced block of a Markdown file."""
    out, cur, lang = [], None, None
    for line in open(path, encoding="utf-8").read().splitlines():
        m = re.match(r"^```(\w*)\s*$", line)
        if m and cur is None:
            cur, lang = [], m.group(1)
        elif line.startswith("```") and cur is not None:
            out.append((lang, cur))
            cur = None
        elif cur is not None:
            cur.append(line)
    return out


def commands(path):
    """(command, shown output lines) for every '$ ' line of the file's blocks."""
    out = []
    for lang, lines in blocks(path):
        for i, line in enumerate(lines):
            if line.startswith("$ "):
                shown = []
                for nxt in lines[i + 1:]:
                    if nxt.startswith("$ "):
                        break
                    shown.append(nxt)
                out.append((line[2:], shown))
    return out


TMP = tempfile.mkdtemp(prefix="smelt-readme-")
STAGE = os.path.join(TMP, "stage")
BIN = os.path.join(TMP, "bin")
WORK = os.path.join(TMP, "work")
os.makedirs(BIN)
os.makedirs(WORK)
os.symlink(BUILD, os.path.join(WORK, "build"))
with open(os.path.join(BIN, "ldconfig"), "w") as f:  # the staged libraries need no cache
    f.write("#!/bin/sh\nexit 0\n")
os.chmod(os.path.join(BIN, "ldconfig"), 0o755)

example = [l for lang, l in blocks(os.path.join(SRC, "README.md")) if lang == "c" and any("int main" in x for x in l)]
check(len(example) == 1, "README.md shows one complete C program (with main)")
if example:
    with open(os.path.join(WORK, "example.c"), "w") as f:
        f.write("\n".join(example[0]) + "\n")

multiarch = subprocess.run(["gcc", "-print-multiarch"], capture_output=True, text=True).stdout.strip()
libdirs = [os.path.join(STAGE, "usr/local/lib", multiarch), os.path.join(STAGE, "usr/local/lib")]
env = dict(os.environ)
for k in ("SMELT_JIT_BACKEND", "MGB_JIT_BACKEND", "SMELT_DUMP_DIR", "SMELT_CACHE", "SMELT_CACHE_MAX_MB"):
    env.pop(k, None)
env.update({
    "DESTDIR": STAGE,
    "PKG_CONFIG_SYSROOT_DIR": STAGE,
    "PKG_CONFIG_LIBDIR": ":".join(os.path.join(d, "pkgconfig") for d in libdirs),
    "LD_LIBRARY_PATH": ":".join(libdirs),
    "PATH": BIN + ":" + env.get("PATH", "/usr/bin:/bin"),
    "SMELT_CACHE_DIR": os.path.join(TMP, "cache"),
})

nvrtc_missing = "libnvrtc" in subprocess.run([os.path.join(BUILD, "smelt"), "explain", "a", "a=f32[1]", "--backend",
                                              "NVRTC", "--no-source"], capture_output=True, text=True, env=env).stderr

for doc in ("README.md", "docs/cli.md"):
    for cmd, shown in commands(os.path.join(SRC, doc)):
        # the project's scripts run where they are (they set up and use build/ there)
        cwd = SRC if re.search(r"(^|\s)scripts/", cmd) else WORK
        p = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, cwd=cwd, env=env)
        what = "%s: $ %s" % (doc, cmd)
        err = [l for l in shown if l.startswith("smelt: error:")]
        if err:
            check(p.returncode == 1 and p.stderr.startswith(err[0]),
                  "%s: expected exit 1 and %r, got %d %r" % (what, err[0], p.returncode, p.stderr))
            continue
        if p.returncode != 0 and "NVRTC" in cmd and nvrtc_missing:
            check(p.returncode == 1 and "NVRTC" in p.stderr, "%s: no libnvrtc: %r" % (what, p.stderr))
            continue
        check(p.returncode == 0, "%s: exit %d: %s %s" % (what, p.returncode, p.stderr[-2000:], p.stdout[-500:]))
        printed = [l for l in shown if l.startswith("[")]
        if printed and p.returncode == 0 and "--time" not in cmd:
            check(p.stdout.splitlines()[:len(printed)] == printed,
                  "%s: prints %r, the document shows %r" % (what, p.stdout, printed))

# the staged install
pcs = glob.glob(os.path.join(STAGE, "**/smelt.pc"), recursive=True)
check(len(pcs) == 1, "meson install puts smelt.pc in place: %r" % pcs)
for name in ("include/smelt.h", "include/smelt_cuda.h", "include/smelt_ops.h", "bin/smelt"):
    check(os.path.exists(os.path.join(STAGE, "usr/local", name)), "installed: %s" % name)
static = glob.glob(os.path.join(STAGE, "**/libsmelt.a"), recursive=True)
check(len(static) == 1, "installed: libsmelt.a")
shared = glob.glob(os.path.join(STAGE, "**/libsmelt.so.0"), recursive=True)
built_shared = os.path.exists(os.path.join(BUILD, "libsmelt.so"))
if built_shared:
    check(len(shared) == 1, "installed: libsmelt.so.0 (the soname)")
    if shared:
        soname = subprocess.run(["readelf", "-d", shared[0]], capture_output=True, text=True).stdout
        check("Library soname: [libsmelt.so.0]" in soname, "versioned soname: %s" % soname)
        syms = subprocess.run(["nm", "-D", "--defined-only", shared[0]], capture_output=True, text=True).stdout.split("\n")
        names = [l.split()[-1] for l in syms if l.strip()]
        bad = [n for n in names if not n.startswith("smelt_") or n.startswith("smelt__") or n.startswith("smelt_blk_")]
        check(names and not bad, "libsmelt.so exports only the smelt_* API: %r" % bad[:10])
        check("smelt_plan_new" in names and "smelt_ctx_new" in names, "the API is exported")
        needed = subprocess.run(["readelf", "-d", shared[0]], capture_output=True, text=True).stdout
        check("libtcc" not in needed, "the TCC tier is inside libsmelt.so")
    exe = os.path.join(WORK, "example")
    if os.path.exists(exe):
        dyn = subprocess.run(["readelf", "-d", exe], capture_output=True, text=True).stdout
        check("libsmelt.so.0" in dyn, "the example links the shared library: %s" % dyn)
else:
    print("test-readme: libsmelt.so was not built (no position-independent TinyCC): static checks only")

# the example's result: swish(x) * 0.5 + 1 for x = -4..3
if example and os.path.exists(os.path.join(WORK, "example")):
    p = subprocess.run([os.path.join(WORK, "example")], capture_output=True, text=True, env=env, cwd=WORK)
    check(p.returncode == 0, "example runs: %s" % p.stderr)
    import math
    got = p.stdout.split("\n")[0].split()
    want = [(x / (1 + math.exp(-x))) * 0.5 + 1 for x in range(-4, 4)]
    check(len(got) == 8 and all(abs(float(g) - w) < 1e-5 for g, w in zip(got, want)),
          "example prints swish(x)*w+1: %r" % got)
    check("1 kernel" in p.stdout, "one fused kernel: %r" % p.stdout)
    p = subprocess.run([os.path.join(WORK, "example")], capture_output=True, text=True, cwd=WORK,
                       env=dict(env, SMELT_JIT_BACKEND="TCC"))
    check(p.returncode == 0 and "[TCC]" in p.stdout, "the TCC tier runs in the installed library: %r %s" % (p.stdout, p.stderr))
    # warning-free under strict flags, and as a static program too
    cflags = subprocess.run(["pkg-config", "--cflags", "smelt"], capture_output=True, text=True, env=env).stdout.split()
    p = subprocess.run(["cc", "-std=c11", "-Wall", "-Wextra", "-Wpedantic", "-Werror", "-c", "example.c", "-o",
                        "example.o"] + cflags, capture_output=True, text=True, cwd=WORK, env=env)
    check(p.returncode == 0, "example.c and smelt.h compile warning-free (-std=c11 -Wall -Wextra -Wpedantic): %s" % p.stderr)

shutil.rmtree(TMP, ignore_errors=True)
done("test-readme")
