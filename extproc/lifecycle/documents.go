package lifecycle

// Documents (admission step 9): a PDF sent by its bytes is bounded by its pages, counted
// from the file once the key is known.

import (
	"github.com/llmgw/gateway/extproc/apierr"
	"github.com/llmgw/gateway/extproc/wire"
	"github.com/llmgw/gateway/internal/pdfpages"
)

// countPages counts the pages of each document of the prompt (wire.Document.Pages), for
// tokens.Media to bound them. A document whose pages cannot be counted (not base64,
// not a PDF, damaged, encrypted, beyond pdfpages' bounds) has no bound, and the request
// is refused as pricing_unavailable naming it; count_tokens, which is not billed, counts
// it as no pages instead.
func (r *Request) countPages() *apierr.Error {
	docs := r.parsed.Prompt.Documents
	priced := r.endpoint.spec().estimate == nil
	for i := range docs {
		n, err := documentPages(docs[i])
		if err != nil && priced {
			return apierr.Param(apierr.PricingUnavailable, docs[i].Param,
				"The pages of the document at '"+docs[i].Param+"' cannot be counted (it is not a readable, unencrypted PDF in base64), so its cost cannot be bounded before the provider reads it; send a valid PDF.")
		}
		docs[i].Pages = n
	}
	return nil
}

// documentPages is the page count of d's bytes.
func documentPages(d wire.Document) (int, error) {
	b, err := wire.Base64Bytes(d.Data)
	if err != nil {
		return 0, err
	}
	return pdfpages.Count(b)
}
