package core

// Version is the one version number of ctxcompact. The npm package.json and the
// Python pyproject.toml must carry the same string; TestVersionsAgree checks it.
const Version = "0.1.0"
