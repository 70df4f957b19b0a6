package objstore

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/minio/minio-go/v7"
)

// S3 errors are turned into sentences that say what to fix. They go into Job termination
// messages and resource status, so they never carry a credential: the secret key and session
// token are redacted from whatever text the library or the network produced.

func errorCode(err error) string {
	var er minio.ErrorResponse
	if errors.As(err, &er) {
		return er.Code
	}
	return ""
}

func (s *S3) noBucket() error {
	return fmt.Errorf("bucket %s does not exist at %s: create it, or fix the bucket name", s.cfg.Bucket, s.endpoint)
}

// explain turns err from operation op on key ("" for the bucket) into an actionable error.
func (s *S3) explain(op, key string, err error) error {
	what := "s3://" + s.cfg.Bucket
	if key != "" {
		what = s.Location(key)
	}
	var out error
	var er minio.ErrorResponse
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var recordHeader tls.RecordHeaderError
	var netErr net.Error
	var urlErr *url.Error
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		out = fmt.Errorf("%s %s: %w", op, what, err)
	case errors.As(err, &er):
		out = s.explainResponse(op, what, er, err)
	case errors.As(err, &unknownCA):
		out = fmt.Errorf("cannot trust the TLS certificate of S3 endpoint %s: it is signed by an unknown authority (%s); give the CA bundle that signed it (--s3-ca-file)", s.endpoint, issuer(unknownCA.Cert))
	case errors.As(err, &hostname):
		out = fmt.Errorf("the TLS certificate of S3 endpoint %s is not valid for that host name (%w): use a host name the certificate names", s.endpoint, hostname)
	case errors.As(err, &invalid):
		out = fmt.Errorf("the TLS certificate of S3 endpoint %s is not valid: %w", s.endpoint, invalid)
	case errors.As(err, &recordHeader), strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		out = fmt.Errorf("S3 endpoint %s does not speak TLS: use an http:// endpoint URL if that is intended", s.endpoint)
	case strings.Contains(err.Error(), "tls: ") || strings.Contains(err.Error(), "x509: "):
		out = fmt.Errorf("TLS handshake with S3 endpoint %s failed: %w", s.endpoint, innermost(err))
	case errors.As(err, &netErr), errors.As(err, &urlErr):
		out = fmt.Errorf("cannot reach S3 endpoint %s: %w", s.endpoint, innermost(err))
	default:
		out = fmt.Errorf("S3 %s %s: %w", op, what, err)
	}
	return s.redact(out)
}

func (s *S3) explainResponse(op, what string, er minio.ErrorResponse, err error) error {
	switch er.Code {
	// XAdminUserNotFound: versitygw's answer to an access key it does not know.
	case "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken", "TokenRefreshRequired", "InvalidClientTokenId", "XAdminUserNotFound":
		return fmt.Errorf("S3 refused the credentials (%s) at %s: check the Secret that provides AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN, if temporary)", er.Code, s.endpoint)
	case "AccessDenied", "AllAccessDisabled":
		return fmt.Errorf("S3 denied %s %s (%s): check that the credentials are right and allowed to do that", op, what, er.Code)
	case "NoSuchBucket":
		return s.noBucket()
	case "NoSuchKey", "NotFound":
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	case "AuthorizationHeaderMalformed", "IllegalLocationConstraintException":
		return fmt.Errorf("S3 refused the request for %s: wrong region (%s); set the bucket's region%s", what, er.Code, regionHint(er.Region))
	}
	if er.Code == "" && er.StatusCode == 404 { // a HEAD answer has no body, hence no code
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	return fmt.Errorf("S3 %s %s: %w", op, what, err)
}

func regionHint(r string) string {
	if r != "" {
		return " (the service says " + r + ")"
	}
	return ""
}

func issuer(c *x509.Certificate) string {
	if c == nil {
		return "no certificate"
	}
	return "issuer " + c.Issuer.String()
}

// innermost is the root cause of a network error ("dial tcp 127.0.0.1:9: connect: connection
// refused"), without the request URL around it.
func innermost(err error) error {
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		return urlErr.Err
	}
	return err
}

// redactedError keeps the wrapped chain (errors.Is(err, ErrNotFound) still works) while its
// message has every credential replaced.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

func (s *S3) redact(err error) error {
	msg := err.Error()
	for _, secret := range s.secrets {
		msg = strings.ReplaceAll(msg, secret, "[redacted]")
	}
	return &redactedError{msg: msg, err: err}
}

// redactURL drops user info from a URL someone may have pasted credentials into.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		if err != nil {
			return "(unparsable)"
		}
		return raw
	}
	u.User = url.User("[redacted]")
	return u.String()
}
