#!/usr/bin/env python3
"""Function length limits (docs/TESTING.md, "Checks").

A function's length is its lines from the first line of its signature to its
closing brace; a lambda counts toward the function it is written in. Limits:
80 lines in the libraries (everything but tests/, tools/, minibench/ and
examples/), 120 in tools/ and minibench/. Prints each function over its
limit as "LEN FILE:LINE NAME" and exits 1 if there is one.

  python3 scripts/check_function_size.py            # the tracked tree
  python3 scripts/check_function_size.py 60 FILE... # report only, any limit
"""
import os
import re
import subprocess
import sys

KEYWORD = re.compile(r'\b(if|for|while|switch|catch|do|else|try)\b\s*$')
LIMITS = [('tools/', 120), ('minibench/', 120)]
LIBRARY_LIMIT = 80
NOT_CHECKED = ('tests/', 'examples/')


def strip(src):
    """Blanks out comments, strings and character literals, keeping newlines."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith('//', i):
            j = src.find('\n', i)
            j = n if j < 0 else j
            out.append(' ' * (j - i))
            i = j
        elif src.startswith('/*', i):
            j = src.find('*/', i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r'[^\n]', ' ', src[i:j]))
            i = j
        elif src.startswith('R"', i) and (m := re.match(r'R"([^(]*)\(', src[i:])):
            end = ')' + m.group(1) + '"'
            j = src.find(end, i) + len(end)
            out.append(re.sub(r'[^\n]', ' ', src[i:j]))
            i = j
        elif c == "'" and i and src[i - 1].isalnum() and src[i + 1:i + 2].isalnum():
            out.append(c)  # a digit separator: 9'200'000
            i += 1
        elif c in '"\'':
            j = i + 1
            while j < n and src[j] != c:
                j += 2 if src[j] == '\\' else 1
            out.append(c + ' ' * (j - i - 1) + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return ''.join(out)


def functions(path):
    """Yields (length, line, name) for each function defined in path."""
    stack, head, start, line = [], '', None, 1  # 'ns' | 'cls' | 'blk' | ('fn', line, name)
    with open(path, errors='replace') as f:
        text = strip(f.read())
    for ch in text:
        if ch == '\n':
            line += 1
        in_fn = any(isinstance(x, tuple) for x in stack)
        if ch == '{':
            h, kind = ' '.join(head.split()), 'blk'
            if not in_fn:
                if re.search(r'\b(namespace|extern)\b', h) and '(' not in h:
                    kind = 'ns'
                elif re.search(r'\b(class|struct|union|enum)\b', h) and '(' not in h.split(':')[0]:
                    kind = 'cls'
                elif '(' in h and not KEYWORD.search(h.split('(')[0]) and not h.endswith('='):
                    names = re.findall(r'((?:\w+::)*~?\w+|operator\s*[^\s(]+)\s*\(', h)
                    kind = ('fn', start or line, names[0] if names else h[:40])
            stack.append(kind)
            head, start = '', None
        elif ch == '}':
            top = stack.pop() if stack else None
            if isinstance(top, tuple):
                yield line - top[1] + 1, top[1], top[2]
            head, start = '', None
        elif ch == ';':
            if not in_fn:
                head, start = '', None
        elif not in_fn:
            if start is None and not ch.isspace():
                start = line
            head += ch
            if ch == '\n' and head.strip().startswith('#'):
                head, start = '', None


def limit_of(path):
    if path.startswith(NOT_CHECKED):
        return None
    for prefix, limit in LIMITS:
        if path.startswith(prefix):
            return limit
    return LIBRARY_LIMIT


def main(argv):
    if len(argv) > 1 and not argv[1].isdigit():
        print(__doc__.strip(), file=sys.stderr if argv[1] not in ('-h', '--help') else sys.stdout)
        return 0 if argv[1] in ('-h', '--help') else 2
    if len(argv) > 1:
        over = int(argv[1])
        for path in argv[2:]:
            for length, line, name in functions(path):
                if length > over:
                    print(f'{length:5d} {path}:{line} {name}')
        return 0
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
    files = subprocess.run(['git', 'ls-files', '*.cc', '*.h'], check=True, capture_output=True,
                           text=True).stdout.split()
    failed = 0
    for path in files:
        limit = limit_of(path)
        if limit is None:
            continue
        for length, line, name in functions(path):
            if length > limit:
                print(f'{length:5d} {path}:{line} {name} (limit {limit})')
                failed = 1
    if failed:
        print('check_function_size: split the functions above into named steps', file=sys.stderr)
    return failed


if __name__ == '__main__':
    sys.exit(main(sys.argv))
