"""The chart render's child process: warms its engine, writes READY on stdout, then reads a
request (JSON) on stdin and writes the image on stdout. Run by `dagwright.charts.renderer` as
`python -I -B _render_child.py MEMORY_MB [SITE_DIR]`, under bubblewrap (no network, no host
files but the Python runtime).

Standalone on purpose: it imports nothing of dagwright (whose folder is not inside the
sandbox), only the standard library and vl_convert. One request per process: V8's state dies
with it, so a spec that breaks the engine cannot break the next render. The parent may start
it ahead of the request (a warm spare), which is why it signals READY.

Exit codes: 0 the image is on stdout; 2 vl-convert refused the spec (its message on stderr);
anything else (a signal, V8's fatal out-of-memory abort) is a crash the parent names.
"""

import json
import os
import resource
import sys

RENDER_REFUSED = 2
# Written once the engine is warm, before the request is read.
READY = b"R"
WARM_UP = {
    "data": {"values": [{"a": 1, "b": 2}]},
    "mark": "point",
    "encoding": {"x": {"field": "a", "type": "quantitative"}, "y": {"field": "b"}},
}


def _limit(resource_id: int, value: int) -> None:
    resource.setrlimit(resource_id, (value, value))


def main() -> int:
    memory = int(sys.argv[1]) * 1024 * 1024
    # RLIMIT_DATA, not RLIMIT_AS: V8 reserves gigabytes of address space it never touches (its
    # pointer cage), so any RLIMIT_AS stops it starting; RLIMIT_DATA counts the writable
    # private memory it really takes. No core files; a few descriptors.
    _limit(resource.RLIMIT_DATA, memory)
    _limit(resource.RLIMIT_CORE, 0)
    _limit(resource.RLIMIT_NOFILE, 64)
    if len(sys.argv) > 2:
        sys.path.append(sys.argv[2])  # where vl_convert is installed, when not in the venv
    import vl_convert

    # Warm: V8's start and Vega-Lite's first compile are ~90 % of a small render. Done on a
    # fixed spec of ours, so the engine the request meets has seen nothing of anyone's.
    vl_convert.vegalite_to_svg(WARM_UP, allowed_base_urls=[])
    sys.stdout.buffer.write(READY)
    sys.stdout.buffer.flush()
    request = json.loads(sys.stdin.buffer.read())

    spec, fmt, scale = request["spec"], request["format"], float(request["scale"])
    try:
        # allowed_base_urls=[]: vl-convert loads nothing, a layer under the policy's refusal
        # and the missing network.
        if fmt == "svg":
            image = str(vl_convert.vegalite_to_svg(spec, allowed_base_urls=[])).encode()
        else:
            image = bytes(vl_convert.vegalite_to_png(spec, scale=scale, allowed_base_urls=[]))
    except ValueError as exc:
        sys.stderr.write(str(exc)[:2000])
        return RENDER_REFUSED
    sys.stdout.buffer.write(image)
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Straight out: tearing V8 down costs time the caller would wait for, and frees nothing
    # the kernel does not free anyway.
    os._exit(code)
