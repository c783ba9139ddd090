"""Build hook: refuse to build a wheel without the WebAssembly module.

The module is copied into src/ctxcompact/ by test.sh (from ../../wasm/ctxcompact.wasm)
together with its sha256; a wheel without it, or with a copy that does not match
its recorded hash, would only fail at import time on the user's machine.
"""

import hashlib
import os

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class CustomBuildHook(BuildHookInterface):
    def initialize(self, version, build_data):
        pkg = os.path.join(self.root, "src", "ctxcompact")
        wasm = os.path.join(pkg, "ctxcompact.wasm")
        sha = os.path.join(pkg, "ctxcompact.wasm.sha256")
        if not (os.path.isfile(wasm) and os.path.isfile(sha)):
            raise RuntimeError(
                "ctxcompact: src/ctxcompact/ctxcompact.wasm is missing; run "
                "`bash bindings/python/test.sh --copy-only` (it copies ../../wasm/ctxcompact.wasm)"
            )
        with open(wasm, "rb") as f:
            got = hashlib.sha256(f.read()).hexdigest()
        with open(sha, encoding="ascii") as f:
            want = f.read().split()[0]
        if got != want:
            raise RuntimeError(f"ctxcompact: packaged .wasm has sha256 {got}, recorded {want}")
