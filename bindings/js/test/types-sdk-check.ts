// Compiled by types.test.mjs with `tsc --strict --noEmit` (the SDKs' own .d.ts not
// checked): the real SDK clients fit the ready summarizers' structural client types.
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { anthropicSummarizer, openaiSummarizer, type ContextEngine, type Summarize } from "ctxcompact";

const openai = new OpenAI({ apiKey: "k", baseURL: "http://127.0.0.1:1/v1", maxRetries: 0 });
const anthropic = new Anthropic({ apiKey: "k", baseURL: "http://127.0.0.1:1", maxRetries: 0 });

export const list: Summarize[] = [
  openaiSummarizer(openai, { model: "gpt-4.1-mini" }),
  openaiSummarizer(openai, { model: "gpt-5-mini", api: "responses", maxTokens: 4000 }),
  anthropicSummarizer(anthropic, { model: "claude-haiku-4-5" }),
];
// @ts-expect-error an OpenAI client is not an Anthropic one
anthropicSummarizer(openai, { model: "claude-haiku-4-5" });

// A prepared body keeps the SDK's request type; an SDK error goes to observeError as is.
export async function nativeTurn(engine: ContextEngine, input: OpenAI.Responses.ResponseInput): Promise<void> {
  const { body } = engine.prepareRequest<OpenAI.Responses.ResponseCreateParamsNonStreaming>({ model: "gpt-5.6", input, store: false });
  try {
    engine.observeResponse(await openai.responses.create(body));
  } catch (err) {
    if (err instanceof OpenAI.APIError || err instanceof Anthropic.APIError) engine.observeError(err);
  }
}
