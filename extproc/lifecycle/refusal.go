package lifecycle

import (
	"fmt"

	"go.uber.org/zap"

	"github.com/llmgw/gateway/extproc/apierr"
	"github.com/llmgw/gateway/extproc/response"
)

// upstreamRefusal is the client's answer to a provider's refusal of the request as
// invalid (400 invalid_request), in the gateway's own words: it names the field the
// provider refused, as param, when the provider's body names one and the request reached
// the provider with the client's own fields (a translated request's are the gateway's);
// the provider's message never reaches the client. The refusal is logged with the
// upstream status, the provider's error type and the field.
func (r *Request) upstreamRefusal(status int, body []byte) *apierr.Error {
	ref := response.RefusedField(body)
	r.log().Info("upstream refused the request as invalid", zap.Int("upstream_status", status),
		zap.String("upstream_type", ref.Type), zap.String("param", ref.Field), zap.Bool("unknown_field", ref.Unknown),
		zap.Bool("translated", r.xlate != nil))
	switch {
	case ref.Field == "" || r.xlate != nil:
		return upstreamError(apierr.InvalidRequest)
	case ref.Unknown:
		return apierr.Param(apierr.InvalidRequest, ref.Field, fmt.Sprintf(
			"The upstream provider does not accept the field %q: check its name, or remove it; nothing was charged.", ref.Field))
	}
	return apierr.Param(apierr.InvalidRequest, ref.Field, fmt.Sprintf(
		"The upstream provider rejected the request's %q as invalid; nothing was charged.", ref.Field))
}
