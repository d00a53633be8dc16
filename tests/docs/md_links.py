"""Every relative link in README.md, bench/RESULTS.md and docs/*.md names a file of the tree,
and every #anchor a heading of its page (GitHub's rule: lower case, punctuation dropped,
spaces to hyphens). Usage: md_links.py SOURCE_DIR"""
import glob
import os
import re
import sys


def anchors(path):
    out = set()
    in_code = False
    for line in open(path, encoding="utf-8"):
        if line.startswith("```"):
            in_code = not in_code
        m = None if in_code else re.match(r"^#+\s+(.*)", line)
        if m:
            out.add(re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-"))
    return out


def main(root):
    pages = [os.path.join(root, "README.md"), os.path.join(root, "bench", "RESULTS.md")]
    pages += sorted(glob.glob(os.path.join(root, "docs", "*.md")))
    bad = []
    for page in pages:
        text = re.sub(r"```.*?```", "", open(page, encoding="utf-8").read(), flags=re.S)
        for link in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", link):
                continue
            path, _, frag = link.partition("#")
            target = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
            where = os.path.relpath(page, root)
            if not os.path.exists(target):
                bad.append("%s: %s: no such file" % (where, link))
            elif frag and target.endswith(".md") and frag not in anchors(target):
                bad.append("%s: %s: no such heading" % (where, link))
    for b in bad:
        print(b)
    print("%d pages, %d broken links" % (len(pages), len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
