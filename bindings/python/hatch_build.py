"""Build hook: put the WebAssembly module into the wheel and the sdist.

The module is committed once, at wasm/ctxcompact.wasm in the repository root. This
hook finds it and force-includes it, with its sha256 in ctxcompact.wasm.sha256 (the
package checks the bytes against it before compiling them):

1. ../../wasm/ctxcompact.wasm relative to this project (a checkout, or the clone pip
   makes for `pip install 'git+file://...#subdirectory=bindings/python'`; pip builds
   a local directory in place, so `pip install ./bindings/python` finds it too);
2. else src/ctxcompact/ctxcompact.wasm with its recorded sha256: the copy an sdist
   carries (this hook put it there), checked against that hash.

Neither: the build fails here, naming both places, rather than producing a package
that could only fail at import time on the user's machine. A stale copy left in
src/ctxcompact/ by an older checkout is ignored while the repository's module is
there (the selection excludes it; only this hook includes the module).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from typing import Any, Dict

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

NAME = "ctxcompact.wasm"
WASM_MAGIC = b"\x00asm"
#: The exact encodings' rank tables, which the module asks its host for (wasm/abi.json
#: "host_imports"): core/internal/bpe/vocab/<name>.bin in a checkout, vocab/ in an sdist.
VOCABULARIES = ("o200k_base.bin", "cl100k_base.bin")


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class CustomBuildHook(BuildHookInterface):
    def initialize(self, version: str, build_data: Dict[str, Any]) -> None:
        if self.target_name not in ("wheel", "sdist"):
            return
        if self.target_name == "wheel" and version == "editable":
            raise RuntimeError(
                "ctxcompact: editable installs are not supported (the module is not in "
                "src/ctxcompact/); install the directory instead: pip install ./bindings/python"
            )
        repo_wasm = os.path.normpath(os.path.join(self.root, "..", "..", "wasm", NAME))
        pkg = os.path.join(self.root, "src", "ctxcompact")
        sdist_wasm = os.path.join(pkg, NAME)
        sdist_sha = os.path.join(pkg, NAME + ".sha256")

        if os.path.isfile(repo_wasm):
            wasm, sha = repo_wasm, _sha256(repo_wasm)
        elif os.path.isfile(sdist_wasm) and os.path.isfile(sdist_sha):
            with open(sdist_sha, encoding="ascii") as f:
                fields = f.read().split()
            sha = _sha256(sdist_wasm)
            if not fields or fields[0] != sha:
                raise RuntimeError(
                    f"ctxcompact: {sdist_wasm} has sha256 {sha}, but {sdist_sha} records "
                    f"{fields[0] if fields else 'nothing'}: the source is damaged"
                )
            wasm = sdist_wasm
        else:
            raise RuntimeError(
                f"ctxcompact: the WebAssembly module is missing: neither {repo_wasm} (a "
                f"checkout of the repository) nor {sdist_wasm} with its .sha256 (an sdist) "
                "exists. Build from a full checkout (`./build.sh wasm` rebuilds the module) "
                "or from the published sdist."
            )
        with open(wasm, "rb") as f:
            if f.read(4) != WASM_MAGIC:
                raise RuntimeError(f"ctxcompact: {wasm} is not a WebAssembly module (a Git LFS pointer?)")

        self._tmp = tempfile.mkdtemp(prefix="ctxcompact-build-")
        sha_file = os.path.join(self._tmp, NAME + ".sha256")
        with open(sha_file, "w", encoding="ascii") as f:
            f.write(f"{sha}  {NAME}\n")
        dest = "ctxcompact" if self.target_name == "wheel" else "src/ctxcompact"
        build_data["force_include"][wasm] = f"{dest}/{NAME}"
        build_data["force_include"][sha_file] = f"{dest}/{NAME}.sha256"
        repo_vocab = os.path.normpath(os.path.join(self.root, "..", "..", "core", "internal", "bpe", "vocab"))
        for v in VOCABULARIES:
            src = os.path.join(repo_vocab, v) if wasm == repo_wasm else os.path.join(pkg, "vocab", v)
            if not os.path.isfile(src):
                raise RuntimeError(f"ctxcompact: the rank table {src} is missing: build from a full checkout or the published sdist")
            build_data["force_include"][src] = f"{dest}/vocab/{v}"

    def finalize(self, version: str, build_data: Dict[str, Any], artifact_path: str) -> None:
        tmp = getattr(self, "_tmp", None)
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
            self._tmp = None
