package simulator

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strconv"
)

// Pre-signed file URLs: what @daytonaio/sdk releases after v0.190.0 call
// sandbox.downloadUrl(path, ttl) and sandbox.uploadUrl(path, ttl). The SDK
// fetches the sandbox's signing key from the API (getSandboxSigningKey),
// signs one operation on one path with it, and hands out
//
//	{toolboxProxyUrl}/{id}/files/download?path=P&expires=E&signature=S   GET (or HEAD)
//	{toolboxProxyUrl}/{id}/files/upload-v2?path=P&expires=E&signature=S  POST
//
// which any HTTP client may use without an API key. S is "v1_" and the
// unpadded base64url HMAC-SHA256, keyed with the signing key's bytes, of
// "v1:files:<GET|POST>:<P>:<E>"; E is a Unix time in seconds after which the
// URL is refused, or 0 for one that never expires. rotateSigningKey makes a
// new key, which every URL signed with the old one fails against.
//
// The toolbox proxy checks such a request itself (proxySignedFile) and, when
// the signature holds, forwards exactly that operation on exactly that path
// to the sandbox's toolbox, in place of the API key.

const (
	signatureParam = "signature"
	expiresParam   = "expires"
	signatureV1    = "v1_"
)

// fileOp is an operation a file-URL signature opens.
type fileOp struct {
	// method is the method the canonical string names.
	method string
	// target is the toolbox route the request goes to.
	target string
}

var (
	signedDownload = fileOp{method: http.MethodGet, target: "/files/download"}
	signedUpload   = fileOp{method: http.MethodPost, target: "/files/upload-v2"}
)

// signedFileOp is the operation r asks for with a signature, when it asks
// for one: a GET or HEAD of files/download or a POST of files/upload-v2
// whose query carries a signature. Any other request, a signature in its
// query or not, goes through the API key as usual.
func signedFileOp(r *http.Request, rest string) (fileOp, bool) {
	if r.URL.Query().Get(signatureParam) == "" {
		return fileOp{}, false
	}
	switch {
	case (r.Method == http.MethodGet || r.Method == http.MethodHead) && rest == "files/download":
		return signedDownload, true
	case r.Method == http.MethodPost && rest == "files/upload-v2":
		return signedUpload, true
	}
	return fileOp{}, false
}

// fileURLCanonical is the string a file URL's signature covers.
func fileURLCanonical(method, path string, expires int64) string {
	return "v1:files:" + method + ":" + path + ":" + strconv.FormatInt(expires, 10)
}

// fileURLSignature signs one operation on one path with key.
func fileURLSignature(key, method, path string, expires int64) string {
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write([]byte(fileURLCanonical(method, path, expires)))
	return signatureV1 + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// validFileSignature reports whether sig signs method on path until
// expires with key, comparing in constant time. No signature is valid
// without a key: a sandbox whose key was never asked for, or that does not
// exist, opens nothing.
func validFileSignature(key, method, path string, expires int64, sig string) bool {
	k := key
	if k == "" {
		// Compute anyway, so that a missing key takes the time a wrong
		// signature does.
		k = "\x00"
	}
	ok := hmac.Equal([]byte(fileURLSignature(k, method, path, expires)), []byte(sig))
	return ok && key != ""
}

// parseFileURL reads the path, expiry and signature of a signed request
// and refuses what Daytona's proxy refuses before it looks at the key: no
// path (400), an expiry that is missing, not a whole number of seconds,
// negative or past (401), a signature of another scheme (401).
func (s proxyAPI) parseFileURL(r *http.Request) (path string, expires int64, sig string, err *apiError) {
	q := r.URL.Query()
	path, sig = q.Get("path"), q.Get(signatureParam)
	if path == "" {
		return "", 0, "", errorf(http.StatusBadRequest, "path query parameter is required")
	}
	v := q.Get(expiresParam)
	if v == "" {
		return "", 0, "", errorf(http.StatusUnauthorized, "expires query parameter is required")
	}
	expires, perr := strconv.ParseInt(v, 10, 64)
	if perr != nil || expires < 0 {
		return "", 0, "", errorf(http.StatusUnauthorized, "invalid expires query parameter")
	}
	if expires != 0 && s.clk.Now().Unix() > expires {
		return "", 0, "", errorf(http.StatusUnauthorized, "signature is expired")
	}
	if len(sig) < len(signatureV1) || sig[:len(signatureV1)] != signatureV1 {
		return "", 0, "", errorf(http.StatusUnauthorized, "unsupported signature scheme")
	}
	return path, expires, sig, nil
}
