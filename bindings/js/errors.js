// Errors of the JS binding. Domain errors (the core's error envelopes) are
// CompactError with the stable `code` and a JSON-pointer `path`; loading errors use
// the host names shared with Go and Python: ErrBadBinary, ErrABIMismatch, ErrClosed.

/** An error envelope from the core: `code` is the contract, the message is not. */
export class CompactError extends Error {
  /**
   * @param {string} code
   * @param {string} message
   * @param {string} [path]
   * @param {{cause?: unknown}} [options]
   */
  constructor(code, message, path = "", options) {
    super(message, options);
    this.name = "CompactError";
    this.code = code;
    this.path = path;
  }
}

/** The bytes are not a ctxcompact module: not WebAssembly, or missing/odd exports or imports. */
export class ErrBadBinary extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = "ErrBadBinary";
  }
}

/** The module's ctxc_abi_version differs from the one this binding speaks. */
export class ErrABIMismatch extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = "ErrABIMismatch";
  }
}

/** The Compactor was closed. */
export class ErrClosed extends Error {
  constructor(message = "ctxcompact: the compactor is closed", options) {
    super(message, options);
    this.name = "ErrClosed";
  }
}

/**
 * A package a feature needs is not installed: `ctxcompact/recall` on a Node without
 * `node:sqlite` needs node-sqlite3-wasm. `code` is "missing_dependency" (stable),
 * `dependency` the package's name, and the message names the install step.
 */
export class ErrMissingDependency extends Error {
  constructor(dependency, message, options) {
    super(message, options);
    this.name = "ErrMissingDependency";
    this.code = "missing_dependency";
    this.dependency = dependency;
  }
}
