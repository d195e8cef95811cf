"""CodeCompiler figures (issue 3): median compile time of a 5-line snippet and a 200-line script.

python -m benchmarks.bench_compiler
"""

from __future__ import annotations

import tree_sitter as ts

from benchmarks._util import median_ms, row
from codemodekit.compiler.compile import CodeCompiler
from codemodekit.compiler.query import LANGUAGE

SNIPPET = """\
const issues = await tools.github.searchIssues({ query: "is:open label:bug", limit: 20 });
const titles: string[] = issues.structuredContent!.items.map((i: { title: string }) => i.title);
console.log(`found ${titles.length}`);
if (titles.length === 0) return null;
return titles.slice(0, 5) as string[];
"""

_HEADER = """\
interface Issue {
  id: number;
  title: string;
  labels: readonly string[];
  assignee?: { login: string } | null;
}

type Severity = "low" | "medium" | "high";
type Grouped<K extends string, V> = { [key in K]?: V[] };

declare const process: unknown;

function severityOf(issue: Issue): Severity {
  if (issue.labels.includes("p0")) return "high";
  return issue.labels.includes("p1") ? "medium" : "low";
}

function groupBy<T, K extends string>(items: readonly T[], key: (item: T) => K): Grouped<K, T> {
  const out: Grouped<K, T> = {};
  for (const item of items) {
    const k = key(item);
    (out[k] ??= []).push(item);
  }
  return out;
}

abstract class Reporter<T> implements Iterable<string> {
  private readonly lines: string[] = [];
  protected abstract format(item: T): string;
  add(item: T): this {
    this.lines.push(this.format(item));
    return this;
  }
  *[Symbol.iterator](): Iterator<string> {
    yield* this.lines;
  }
}

class IssueReporter extends Reporter<Issue> {
  protected override format(issue: Issue): string {
    return `#${issue.id} ${issue.title} (${severityOf(issue)})`;
  }
}

"""

_BLOCK = """\
const page{n} = await tools.github.searchIssues({{ query: "repo:acme/app is:open", page: {n} }});
const items{n} = (page{n}.structuredContent as {{ items: Issue[] }}).items;
const byLevel{n} = groupBy<Issue, Severity>(items{n}, severityOf);
const high{n}: Issue[] = byLevel{n}.high ?? [];
for (const issue of high{n}) {{
  const comments = await tools["deployment-api"].listComments({{ id: issue.id }}) satisfies unknown;
  console.log(issue.title, comments!);
}}
const counts{n} = new Map<Severity, number>();
counts{n}.set("high", high{n}.length);
"""


def realistic_script(lines: int = 200) -> str:
    parts = [_HEADER]
    n = 0
    while sum(p.count("\n") for p in parts) < lines - 12:
        parts.append(_BLOCK.format(n=n))
        n += 1
    parts.append(
        "const reporter = new IssueReporter();\n"
        "for (const issue of items0) reporter.add(issue);\n"
        "return { report: [...reporter], pages: " + str(n) + " };\n"
    )
    return "".join(parts)


def main() -> None:
    compiler = CodeCompiler()
    script = realistic_script()
    parser = ts.Parser(LANGUAGE)
    data = script.encode()
    limit = 1 << 20
    print(f"  script: {script.count(chr(10))} lines, {len(data)} bytes")
    row(
        "compile 5-line snippet",
        median_ms(lambda: compiler.compile(SNIPPET, max_source_bytes=limit)),
        "ms",
    )
    row(
        "compile 200-line script",
        median_ms(lambda: compiler.compile(script, max_source_bytes=limit)),
        "ms",
    )
    row("  of which tree-sitter parse only", median_ms(lambda: parser.parse(data)), "ms")
    big = (script * (limit // len(data) + 1))[: 128 * 1024]
    big = big[: big.rindex("\nconst page")]  # end on a statement boundary
    row(
        f"compile {len(big.encode()) // 1024} KiB script (the default source_bytes)",
        median_ms(lambda: compiler.compile(big, max_source_bytes=limit), repeat=20, warmup=2),
        "ms",
    )


if __name__ == "__main__":
    main()
