package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var (
	mdLink      = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	mdHeading   = regexp.MustCompile(`^#{1,6} (.+?)\s*$`)
	slugDropped = regexp.MustCompile(`[^\p{L}\p{N} _-]`)
)

// mdAnchors returns the anchors GitHub gives a markdown file's headings:
// lower case, punctuation dropped, spaces as hyphens, "-1", "-2" on repeats.
func mdAnchors(doc string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	inCode := false
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(line, "```") {
			inCode = !inCode
			continue
		}
		m := mdHeading.FindStringSubmatch(line)
		if inCode || m == nil {
			continue
		}
		slug := strings.ReplaceAll(slugDropped.ReplaceAllString(strings.ToLower(m[1]), ""), " ", "-")
		if n := seen[slug]; n > 0 {
			anchors[slug+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[slug] = true
		}
		seen[slug]++
	}
	return anchors
}

// TestDocsLinksResolve: every relative link in README.md and docs/*.md
// names a file of the repository and, with a #fragment, a heading in it;
// nothing points outside the repository.
func TestDocsLinksResolve(t *testing.T) {
	root := "../.."
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join(root, "README.md"), filepath.Join(root, "bench", "README.md"))
	absRoot, _ := filepath.Abs(root)
	checked := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(raw), -1) {
			link := m[1]
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			checked++
			path, frag, _ := strings.Cut(link, "#")
			target := f
			if path != "" {
				target = filepath.Join(filepath.Dir(f), path)
				abs, _ := filepath.Abs(target)
				if !strings.HasPrefix(abs, absRoot+string(filepath.Separator)) {
					t.Errorf("%s: link %q points outside the repository", f, link)
					continue
				}
				if _, err := os.Stat(target); err != nil {
					t.Errorf("%s: link %q: %v", f, link, err)
					continue
				}
			}
			if frag == "" || !strings.HasSuffix(target, ".md") {
				continue
			}
			doc, err := os.ReadFile(target)
			if err != nil {
				t.Fatal(err)
			}
			if !mdAnchors(string(doc))[frag] {
				t.Errorf("%s: link %q: no heading with anchor #%s in %s", f, link, frag, target)
			}
		}
	}
	if checked < 10 {
		t.Fatalf("only %d links checked: is the parser right?", checked)
	}
	readme, _ := os.ReadFile(filepath.Join(root, "README.md"))
	if !strings.Contains(string(readme), "(docs/API.md)") || strings.Contains(string(readme), "shared/SPEC") {
		t.Error("README.md must link docs/API.md and not point at the contract outside the repository")
	}
}

// TestMDAnchors: the slug rules the link test relies on.
func TestMDAnchors(t *testing.T) {
	a := mdAnchors("# A b\n## `GET /jobs/{id}/errors`\n## A b\n```\n# not a heading\n```\n## Why is my job waiting?\n")
	for _, want := range []string{"a-b", "get-jobsiderrors", "a-b-1", "why-is-my-job-waiting"} {
		if !a[want] {
			t.Errorf("no anchor %q in %v", want, a)
		}
	}
	if a["not-a-heading"] {
		t.Error("a line in a code block made an anchor")
	}
}
