"""The one result contract every generated declaration and ``search_tools`` answer shares."""

from __future__ import annotations

RESULT_CONTRACT = """\
/** A text block. */
interface TextContent { type: "text"; text: string }
/** Binary media, base64 in `data`. */
interface ImageContent { type: "image"; mimeType: string; data: string }
interface AudioContent { type: "audio"; mimeType: string; data: string }
/** A link to a resource the tool did not inline. */
interface ResourceLinkContent {
  type: "resource_link";
  uri: string;
  name: string;
  mimeType?: string;
  title?: string;
  description?: string;
}
/** An inlined resource: `text`, or `blob` (base64). */
interface EmbeddedResource {
  type: "resource";
  resource:
    | { uri: string; mimeType?: string; text: string }
    | { uri: string; mimeType?: string; blob: string };
}
type ContentBlock =
  | TextContent
  | ImageContent
  | AudioContent
  | ResourceLinkContent
  | EmbeddedResource;
/**
 * What every `await tools.<source>.<tool>(input)` resolves to.
 * - `structuredContent` is the tool's JSON value (typed `T` when it declares an output schema);
 *   read it first.
 * - Without it, the answer is in `content`: text blocks often hold JSON, so parse guarded:
 *   `const b = r.content.find((c) => c.type === "text");`
 *   `let v: unknown = r.structuredContent;`
 *   `if (v === undefined && b && b.type === "text") {`
 *   `  try { v = JSON.parse(b.text); } catch { v = b.text; } }`
 * - A failed call rejects with a `ToolCallError`; catch it to recover or to try another way.
 */
interface ToolResult<T = unknown> {
  content: ContentBlock[];
  structuredContent?: T;
}
/**
 * A failed tool call: `code` is stable (`TOOL_INPUT_INVALID`, `TOOL_DENIED`, `TOOL_ERROR`,
 * `TOOL_TIMEOUT`, …), `message` is safe to show.
 * `try { … } catch (e) { if ((e as ToolCallError).code === "TOOL_DENIED") … }`
 */
interface ToolCallError extends Error {
  name: "ToolCallError";
  code: string;
  tool: string;
  source: string;
}
"""
