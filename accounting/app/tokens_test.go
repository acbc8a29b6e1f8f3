package app

const (
	svcOld = "service-token-old-0123456789"
	svcNew = "service-token-new-0123456789"
	admOld = "admin-token-old-0123456789"
)
