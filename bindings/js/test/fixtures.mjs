// Test fixtures with no node: imports, so the browser test can load them too.

/**
 * A synthetic coding session: system, first request, `turns` tool rounds with
 * `outputChars`-long outputs, then a final user request. Tag makes texts unique.
 */
export function session({ turns = 30, outputChars = 3000, tag = "" } = {}) {
  const msgs = [
    { role: "system", content: `You are a coding agent${tag}.` },
    { role: "user", content: `Help me set up a FastAPI project${tag}.` },
  ];
  for (let i = 0; i < turns; i++) {
    const id = `call_${i}${tag.replace(/\W/g, "")}`;
    msgs.push({
      role: "assistant",
      content: i % 3 === 0 ? `Step ${i}: reading the file.` : null,
      tool_calls: [{ id, type: "function", function: { name: "read_file", arguments: JSON.stringify({ path: `app/module_${i}.py` }) } }],
      reasoning_content: `thinking about step ${i}`,
    });
    msgs.push({ role: "tool", tool_call_id: id, content: `# module ${i}${tag}\n` + `def f_${i}(x):\n    return x * ${i}\n`.repeat(Math.ceil(outputChars / 32)).slice(0, outputChars) });
    if (i % 10 === 9) msgs.push({ role: "user", content: `Now continue with part ${i}${tag}.` });
  }
  msgs.push({ role: "assistant", content: "All modules are read." });
  msgs.push({ role: "user", content: `Great, also add error handling${tag}.` });
  return msgs;
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
