package lifecycle

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/llmgw/gateway/extproc/apierr"
	"github.com/llmgw/gateway/extproc/wire"
)

// MaxJSONDepth is the deepest nesting of objects and arrays a request body may have. No
// request of the supported APIs comes near it (a tool's JSON schema is the deepest part
// of a real request); a body past it is refused before any recursive parser sees it.
const MaxJSONDepth = 128

// smallObject is how many keys an object may have before its repetition check uses a
// map instead of a linear scan.
const smallObject = 16

// shapeFrame is one open object or array of the scan.
type shapeFrame struct {
	object   bool
	keyStart int                 // the object's first key in jsonShape.keys
	seen     map[string]struct{} // the object's keys once it has more than smallObject
	key      string              // the object's current key
	index    int                 // the array's current element
}

// checkJSONShape refuses a body whose objects or arrays nest deeper than MaxJSONDepth,
// or in which any object, at any depth, repeats a key (escaped spellings of one name
// count as the same key).
//
// Parsers disagree on which copy of a repeated key wins: gjson, which extproc reads
// with, takes the first, while the providers' parsers take the last. A repeated key
// would let extproc validate and price one request while the provider serves another
// (a stream whose usage report the provider was told to leave out, message content the
// estimate never saw), so it is refused wherever it occurs.
//
// It is one linear pass without recursion, and it runs before the body is parsed: the
// parsers recurse, and a 2 MiB body of nested brackets would otherwise cost each request
// hundreds of megabytes of stack. A body that is not JSON is left to the parser to
// report.
func checkJSONShape(body []byte) *apierr.Error {
	var (
		stackBuf  [16]shapeFrame
		keyBuf    [32]string
		stack     = stackBuf[:0]
		keys      = keyBuf[:0]
		expectKey bool
	)
	for i := 0; i < len(body); {
		switch c := body[i]; c {
		case '{', '[':
			if len(stack) >= MaxJSONDepth {
				return apierr.New(apierr.InvalidRequest,
					"The request body nests objects and arrays deeper than "+strconv.Itoa(MaxJSONDepth)+" levels.")
			}
			stack = append(stack, shapeFrame{object: c == '{', keyStart: len(keys)})
			expectKey = c == '{'
			i++
		case '}', ']':
			if len(stack) == 0 {
				return nil
			}
			keys = keys[:stack[len(stack)-1].keyStart]
			stack = stack[:len(stack)-1]
			expectKey = false
			i++
		case ',':
			if len(stack) > 0 {
				top := &stack[len(stack)-1]
				if top.object {
					expectKey = true
				} else {
					top.index++
				}
			}
			i++
		case '"':
			end, escaped := wire.StringEnd(body, i) // its bytes are read a word at a time
			if end < 0 {
				return nil
			}
			j := end - 1 // the closing quote
			if expectKey && len(stack) > 0 && stack[len(stack)-1].object {
				k := string(body[i+1 : j])
				if escaped {
					if err := json.Unmarshal(body[i:j+1], &k); err != nil {
						return nil
					}
				}
				top := &stack[len(stack)-1]
				var dup bool
				if dup, keys = repeated(top, keys, k); dup {
					top.key = k
					p := shapePath(stack)
					return apierr.Param(apierr.InvalidRequest, p, "The field '"+p+"' appears more than once.")
				}
				top.key = k
				expectKey = false
			}
			i = j + 1
		default:
			i++
		}
	}
	return nil
}

// repeated records key k in the object top and reports whether it was already there,
// with keys as it now is. (keys goes in and comes back rather than by pointer, so that
// checkJSONShape's buffer for it stays on its stack.)
func repeated(top *shapeFrame, keys []string, k string) (bool, []string) {
	if top.seen != nil {
		if _, ok := top.seen[k]; ok {
			return true, keys
		}
		top.seen[k] = struct{}{}
		return false, keys
	}
	own := keys[top.keyStart:]
	for _, s := range own {
		if s == k {
			return true, keys
		}
	}
	if len(own) < smallObject {
		return false, append(keys, k)
	}
	top.seen = make(map[string]struct{}, 2*len(own))
	for _, s := range own {
		top.seen[s] = struct{}{}
	}
	top.seen[k] = struct{}{}
	return false, keys
}

// shapePath names the current position as the API errors do: "messages[0].content".
func shapePath(stack []shapeFrame) string {
	var b strings.Builder
	for i, f := range stack {
		switch {
		case f.object:
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(f.key)
		case i > 0:
			b.WriteString("[" + strconv.Itoa(f.index) + "]")
		}
	}
	return b.String()
}
