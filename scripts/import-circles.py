#!/usr/bin/env python3
"""Finds import circles between the files of the workspace's crates.

The graph is derived from the sources alone: `mod` declarations give each crate's module tree
(which file is which module), and every `use` declaration is an edge from the file it is in to
the file that defines what it names. A re-export (`pub use`, `pub(crate) use`) is a module's
face to the others, not an import of its own, so it is no edge; a name a module re-exports (`pub use record::Connection`
in `capture/mod.rs`) is followed to the file that defines it, so `use super::Connection` in a
sibling is an edge to `record.rs`, not to `mod.rs`. A `mod` declaration itself is no edge: a
parent declaring its children is the tree, not an import.

Every target is a root: `src/lib.rs`, `src/main.rs`, `src/bin/*.rs`, and each file of `tests/`,
`benches/`, `examples/` and `fuzz_targets/`. `#[cfg(test)]` modules written inline are left out
(a unit test's `use super::*` imports the module it tests, by design); test modules in files of
their own are files like the others.

Usage: scripts/import-circles.py [ROOT]   (exit 1 and one line per circle when there is any)
       scripts/import-circles.py --self-test  (the check on small crates written for it)
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIP_DIRS = {"target", ".git", ".tools", "node_modules"}


def strip_comments_and_strings(text):
    """The source with comments and string/char literals blanked (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:i + 20]) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'r(#*)"', text[i:])
            end = '"' + m.group(1)
            j = text.find(end, i + len(m.group(0)))
            j = n if j < 0 else j + len(end)
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j + 1
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", text[i:i + 12]):
            m = re.match(r"'(\\[^']*|[^\\'])'", text[i:])
            if m:
                out.append("' '")
                i += len(m.group(0))
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def block_end(text, open_at):
    """Index just past the brace block that opens at `open_at`."""
    depth = 0
    for j in range(open_at, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return j + 1
    return len(text)


CFG_TEST_MOD = re.compile(r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{")


def without_inline_test_modules(text):
    while True:
        m = CFG_TEST_MOD.search(text)
        if not m:
            return text
        end = block_end(text, m.end() - 1)
        text = text[:m.start()] + "\n" * text.count("\n", m.start(), end) + text[end:]


MOD_DECL = re.compile(r"(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*(;|\{)")
USE_DECL = re.compile(r"(\bpub(?:\([^)]*\))?\s+)?\buse\s+([^;]+);")


def parse_use_tree(tree):
    """`a::{b, c::d as e, self}` -> [(['a','b'], 'b'), (['a','c','d'], 'e'), (['a'], 'a')]."""
    tree = re.sub(r"\s+", "", tree)
    leaves = []

    def walk(prefix, s):
        depth, parts, cur = 0, [], ""
        for ch in s:
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
            else:
                cur += ch
        if cur:
            parts.append(cur)
        for part in parts:
            if "{" in part:
                head, rest = part.split("{", 1)
                head = [p for p in head.split("::") if p]
                walk(prefix + head, rest[:-1])
            else:
                alias = None
                if "\x00" in part:
                    part, alias = part.split("\x00", 1)
                segs = prefix + [p for p in part.split("::") if p]
                if segs and segs[-1] == "self":
                    segs = segs[:-1]
                if not segs:
                    continue
                name = alias or segs[-1]
                leaves.append((segs, name))

    walk([], tree)
    return leaves


def use_trees(text):
    """Each `use` declaration: whether it re-exports (`pub use`, `pub(crate) use`, …), and its
    tree, with `as` marked."""
    for m in USE_DECL.finditer(text):
        body = re.sub(r"\s+as\s+", "\x00", m.group(2).strip())
        body = re.sub(r"^::", "", body)
        yield m.group(1) is not None, body


class Module:
    def __init__(self, crate, path, file):
        self.crate, self.path, self.file = crate, path, file
        self.children = {}   # name -> Module
        self.imports = {}    # name -> (Module, segments)
        self.uses = []       # segments lists (leaves)


def module_file(dir_, name):
    for cand in (dir_ / f"{name}.rs", dir_ / name / "mod.rs"):
        if cand.is_file():
            return cand
    return None


def child_dir(file, is_root):
    """Where the modules `file` declares live: beside a crate root or a `mod.rs`, else in the
    directory named after the file."""
    if is_root or file.name == "mod.rs":
        return file.parent
    return file.parent / file.stem


def load(crate, path, file, source_of, modules, is_root=False):
    module = Module(crate, path, file)
    modules.append(module)
    text = source_of(file)
    # Inline modules are the same file: their declarations are read with it.
    for m in MOD_DECL.finditer(text):
        name, kind = m.group(1), m.group(2)
        if kind == "{":
            continue
        target = module_file(child_dir(file, is_root), name)
        if target is None:
            # A `#[path]` or generated module: not followed.
            continue
        module.children[name] = load(crate, path + [name], target, source_of, modules)
    for reexport, tree in use_trees(text):
        for segs, name in parse_use_tree(tree):
            if segs[-1] == "*":
                if not reexport:
                    module.uses.append(segs[:-1])
                continue
            # A re-export is the module's face to others, not an import of its own: it is
            # followed when others name it, and is no edge.
            if not reexport:
                module.uses.append(segs)
            module.imports[name] = segs
    return module


def resolve(module, segs, root, seen=None):
    """The file defining what `segs` names from `module`, or None (another crate, std, …)."""
    seen = seen or set()
    key = (id(module), tuple(segs))
    if key in seen:
        return None
    seen.add(key)
    cur, rest = module, list(segs)
    if not rest:
        return None
    head = rest[0]
    if head == "crate":
        cur, rest = root, rest[1:]
    elif head in ("self", "super"):
        while rest and rest[0] in ("self", "super"):
            if rest[0] == "super":
                cur = cur.parent
                if cur is None:
                    return None
            rest = rest[1:]
    elif head in module.children:
        pass
    elif head in module.imports and module.imports[head] != segs:
        target = resolve(module, module.imports[head], root, seen)
        if target is None:
            return None
        return walk(target, rest[1:], root, seen) if isinstance(target, Module) else target
    else:
        return None  # another crate, or std
    return walk(cur, rest, root, seen)


def walk(cur, rest, root, seen):
    """Descends from module `cur` along `rest`; returns a Module (when `rest` names one) or a
    file (the one defining the item)."""
    for i, seg in enumerate(rest):
        if seg in cur.children:
            cur = cur.children[seg]
            continue
        if seg in cur.imports:
            target = resolve(cur, cur.imports[seg], root, seen)
            if isinstance(target, Module):
                cur = target
                continue
            if target is not None:
                return target
        return cur.file
    return cur


def crate_roots(crate_dir):
    roots = []
    src = crate_dir / "src"
    for name in ("lib.rs", "main.rs"):
        if (src / name).is_file():
            roots.append(src / name)
    for sub in ("src/bin", "tests", "benches", "examples", "fuzz_targets"):
        d = crate_dir / sub
        if d.is_dir():
            roots.extend(sorted(p for p in d.glob("*.rs") if p.is_file()))
            if sub == "src/bin":
                roots.extend(sorted(p / "main.rs" for p in d.iterdir() if (p / "main.rs").is_file()))
    return roots


def crates(root):
    for toml in sorted(root.rglob("Cargo.toml")):
        if any(part in SKIP_DIRS for part in toml.relative_to(root).parts):
            continue
        if "[package]" in toml.read_text():
            yield toml.parent


def graph(root):
    cache = {}

    def source_of(file):
        if file not in cache:
            text = file.read_text(encoding="utf-8", errors="replace")
            cache[file] = without_inline_test_modules(strip_comments_and_strings(text))
        return cache[file]

    edges = {}
    for crate in crates(root):
        for root_file in crate_roots(crate):
            modules = []
            top = load(crate, [], root_file, source_of, modules, is_root=True)

            def set_parents(module, parent):
                module.parent = parent
                for child in module.children.values():
                    set_parents(child, module)

            set_parents(top, None)
            for module in modules:
                for segs in module.uses:
                    target = resolve(module, segs, top)
                    if isinstance(target, Module):
                        target = target.file
                    if target is not None and target != module.file:
                        edges.setdefault(module.file, set()).add(target)
    return edges


def circles(edges):
    """Strongly connected components of more than one file (Tarjan, iterative)."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    nodes = set(edges) | {t for ts in edges.values() for t in ts}
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            node, it = work[-1]
            advanced = False
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(edges.get(nxt, ())))))
                    advanced = True
                    break
                if nxt in on:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def cycle_in(comp, edges):
    """One circle through the component's first file, as a path."""
    members = set(comp)
    start = comp[0]
    prev = {start: None}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for nxt in sorted(edges.get(node, ())):
            if nxt == start:
                path = [node]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                return list(reversed(path)) + [start]
            if nxt in members and nxt not in prev:
                prev[nxt] = node
                queue.append(nxt)
    return comp


def report(root):
    """Prints the circles under `root`; the number found."""
    edges = graph(root)
    found = circles(edges)
    rel = lambda p: str(p.relative_to(root))
    for comp in found:
        path = cycle_in(comp, edges)
        print(f"import circle ({len(comp)} files): " + " -> ".join(rel(p) for p in path))
        if len(comp) > len(path) - 1:
            print("  in the circle too: " + ", ".join(rel(p) for p in comp if p not in path))
    files = len(set(edges) | {t for ts in edges.values() for t in ts})
    if found:
        print(f"{len(found)} import circle(s) among {files} files")
    else:
        print(f"no import circle among {files} files")
    return len(found)


def self_test():
    """The check on crates written for it: circles it must find, and layouts it must pass."""
    import tempfile

    cases = {
        # A file and the one it imports, importing it back through the parent's re-export.
        "circle_through_reexport": (1, {
            "src/lib.rs": "mod a;\nmod b;\npub use a::A;\npub(crate) use b::B;\n",
            "src/a.rs": "use crate::B;\npub struct A(B);\n",
            "src/b.rs": "use super::a::{self as other, A};\npub struct B;\nfn f(_: A) {}\n",
        }),
        # A child using what its parent defines, while the parent uses the child.
        "parent_and_child": (1, {
            "src/main.rs": "mod api;\nfn main() {}\n",
            "src/api/mod.rs": "mod echo;\nuse echo::Route;\npub struct State;\n",
            "src/api/echo.rs": "use super::State;\npub struct Route;\n",
        }),
        # Layered: siblings below siblings, the parent re-exporting and importing only below.
        "layered": (0, {
            "src/lib.rs": "mod api;\npub use api::Api;\n",
            "src/api/mod.rs": "mod echo;\nmod state;\nuse echo::Route;\n"
                              "pub(crate) use state::State;\npub struct Api(Route);\n",
            "src/api/echo.rs": "use super::State;\nuse std::sync::Arc;\npub struct Route(Arc<State>);\n",
            "src/api/state.rs": "pub struct State;\n",
            "tests/t.rs": "mod support;\nuse support::helper;\n",
            "tests/support/mod.rs": "pub fn helper() {}\n",
        }),
        # A unit test's `use super::*` is no circle; neither is a comment or a string.
        "tests_and_text": (0, {
            "src/lib.rs": "mod a;\nmod b;\nuse a::A;\n",
            "src/a.rs": "// use crate::b::B;\npub struct A;\nconst S: &str = \"use crate::b::B;\";\n",
            "src/b.rs": "use crate::a::A;\n#[cfg(test)]\nmod tests {\n    use super::*;\n}\n",
        }),
    }
    failed = 0
    for name, (want, files) in cases.items():
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            (root / "Cargo.toml").write_text("[package]\nname = \"t\"\n")
            for rel, text in files.items():
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                (root / rel).write_text(text)
            got = len(circles(graph(root)))
            status = "ok" if got == want else "FAILED"
            failed += got != want
            print(f"self-test {name}: {got} circle(s), expected {want}: {status}")
    return 1 if failed else 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT
    return 1 if report(root) else 0


if __name__ == "__main__":
    sys.exit(main())
