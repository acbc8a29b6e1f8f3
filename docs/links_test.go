package docs

import (
	"bytes"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/text"
)

// readmeMaxLines keeps the front page a page: topics belong in docs/.
const readmeMaxLines = 250

// root is the repository root, relative to this package.
const root = ".."

// checked are the Markdown files outside docs/ whose links are checked too.
var checked = []string{"README.md", "envoy/README.md", "deploy/README.md"}

func TestReadmeIsShort(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte("\n")); n > readmeMaxLines {
		t.Errorf("README.md has %d lines, at most %d: move the detail to a page under docs/", n, readmeMaxLines)
	}
}

func TestEveryPageLinkedFromReadme(t *testing.T) {
	linked := map[string]bool{}
	for _, l := range links(t, "README.md") {
		if target, _, ok := resolve("README.md", l); ok {
			linked[target] = true
		}
	}
	for _, page := range pages(t) {
		if !linked[page] {
			t.Errorf("README.md does not link %s", page)
		}
	}
}

func TestRelativeLinksResolve(t *testing.T) {
	anchors := map[string][]string{}
	for _, file := range append(slices.Clone(checked), pages(t)...) {
		for _, l := range links(t, file) {
			target, fragment, ok := resolve(file, l)
			if !ok {
				continue
			}
			if _, err := os.Stat(filepath.Join(root, target)); err != nil {
				t.Errorf("%s: link %q: %s does not exist", file, l, target)
				continue
			}
			if fragment == "" || !strings.HasSuffix(target, ".md") {
				continue
			}
			if _, ok := anchors[target]; !ok {
				anchors[target] = headingAnchors(t, target)
			}
			if !slices.Contains(anchors[target], fragment) {
				t.Errorf("%s: link %q: %s has no heading #%s (it has %v)", file, l, target, fragment, anchors[target])
			}
		}
	}
}

// pages are the Markdown files under docs/, as repository paths.
func pages(t *testing.T) []string {
	t.Helper()
	var out []string
	err := fs.WalkDir(os.DirFS(root), "docs", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			out = append(out, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("no pages under docs/")
	}
	return out
}

// parse reads a repository file as Markdown.
func parse(t *testing.T, file string) (ast.Node, []byte) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(root, file))
	if err != nil {
		t.Fatal(err)
	}
	return goldmark.DefaultParser().Parse(text.NewReader(src)), src
}

// links are the destinations of a file's links and images (not of text in code).
func links(t *testing.T, file string) []string {
	t.Helper()
	doc, _ := parse(t, file)
	var out []string
	err := ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if entering {
			switch n := n.(type) {
			case *ast.Link:
				out = append(out, string(n.Destination))
			case *ast.Image:
				out = append(out, string(n.Destination))
			}
		}
		return ast.WalkContinue, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// resolve turns a link in file into the repository path it names and its fragment; ok is
// false for links that leave the repository (a scheme, a host, or an absolute path).
func resolve(file, link string) (target, fragment string, ok bool) {
	u, err := url.Parse(link)
	if err != nil || u.Scheme != "" || u.Host != "" || strings.HasPrefix(u.Path, "/") {
		return "", "", false
	}
	target = file
	if u.Path != "" {
		target = path.Join(path.Dir(file), u.Path)
	}
	return target, u.Fragment, true
}

// headingAnchors are the anchors GitHub gives a file's headings: the text lowercased,
// punctuation dropped, spaces as hyphens, and -1, -2 … on repeats.
func headingAnchors(t *testing.T, file string) []string {
	t.Helper()
	doc, src := parse(t, file)
	var out []string
	seen := map[string]int{}
	err := ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		h, ok := n.(*ast.Heading)
		if !entering || !ok {
			return ast.WalkContinue, nil
		}
		slug := slugOf(plainText(h, src))
		if k := seen[slug]; k > 0 {
			out = append(out, slug+"-"+strconv.Itoa(k))
		} else {
			out = append(out, slug)
		}
		seen[slug]++
		return ast.WalkSkipChildren, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// plainText is the text of a heading, code spans included, without markup.
func plainText(n ast.Node, src []byte) string {
	var b strings.Builder
	_ = ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
		if t, ok := c.(*ast.Text); ok && entering {
			b.Write(t.Segment.Value(src))
		}
		return ast.WalkContinue, nil
	})
	return b.String()
}

func slugOf(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
