// Node-only file access (also works in Deno and Bun through their node: support).
// Loaded by runtime.js with a dynamic import, only for file: URLs and paths, so the
// core binding path has no `node:` imports and bundles for browsers as is.
import { readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";

/** @param {URL} url */
export function readURL(url) {
  return readFile(url);
}

/** @param {string} path */
export function readPath(path) {
  return readFile(path);
}

/** @param {URL} url */
export function readURLSync(url) {
  return readFileSync(url);
}
