package safetensors

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// JSON token helpers for the shard index (a small file; the header has
// its own scanner in header.go).

// readStringMap reads a JSON object whose values are all strings,
// rejecting duplicate keys.
func readStringMap(dec *json.Decoder) (map[string]string, error) {
	if err := delim(dec, '{', "an object"); err != nil {
		return nil, err
	}
	m := map[string]string{}
	for dec.More() {
		k, err := stringToken(dec, "a key")
		if err != nil {
			return nil, err
		}
		if _, dup := m[k]; dup {
			return nil, errorf(ErrHeader, "key %q appears twice", k)
		}
		v, err := stringToken(dec, fmt.Sprintf("a string value for %q", k))
		if err != nil {
			return nil, err
		}
		m[k] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, jsonErr(err)
	}
	return m, nil
}

func stringToken(dec *json.Decoder, want string) (string, error) {
	tok, err := dec.Token()
	if err != nil {
		return "", jsonErr(err)
	}
	s, ok := tok.(string)
	if !ok {
		return "", errorf(ErrHeader, "expected %s, found %s", want, describe(tok))
	}
	return s, nil
}

func delim(dec *json.Decoder, d json.Delim, want string) error {
	tok, err := dec.Token()
	if err != nil {
		return jsonErr(err)
	}
	if tok != d {
		return errorf(ErrHeader, "expected %s, found %s", want, describe(tok))
	}
	return nil
}

// describe names a JSON token for an error message without echoing
// arbitrarily long input.
func describe(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		switch v {
		case '{':
			return "an object"
		case '[':
			return "an array"
		}
		return fmt.Sprintf("%q", string(v))
	case string:
		return fmt.Sprintf("string %q", clip(v))
	case json.Number:
		return "number " + string(v)
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", tok)
}

func jsonErr(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return &FormatError{Err: ErrHeader, Msg: "header JSON ends early", Cause: err}
	}
	return &FormatError{Err: ErrHeader, Msg: "header is not valid JSON: " + err.Error(), Cause: err}
}
