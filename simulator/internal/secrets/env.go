package secrets

// ProxyEnv is what a sandbox's processes need besides the placeholders:
// the proxy in both spellings clients read, loopback kept off it (the
// sandbox's own services), and caFile named by the variables through
// which common clients take extra roots. caFile must hold the sandbox's
// usual roots with CACertPEM appended: SSL_CERT_FILE, REQUESTS_CA_BUNDLE
// and CURL_CA_BUNDLE replace the roots rather than add to them, and the
// hosts that are tunnelled show their own certificates.
func ProxyEnv(proxyURL, caFile string) map[string]string {
	return map[string]string{
		"HTTP_PROXY":          proxyURL,
		"HTTPS_PROXY":         proxyURL,
		"http_proxy":          proxyURL,
		"https_proxy":         proxyURL,
		"NO_PROXY":            "localhost,127.0.0.1,::1",
		"no_proxy":            "localhost,127.0.0.1,::1",
		"SSL_CERT_FILE":       caFile, // OpenSSL, Go, Ruby
		"NODE_EXTRA_CA_CERTS": caFile, // Node adds it to its own roots
		"REQUESTS_CA_BUNDLE":  caFile, // Python requests
		"CURL_CA_BUNDLE":      caFile, // curl, and pip
		"GIT_SSL_CAINFO":      caFile,
		"DENO_CERT":           caFile,
	}
}
