// Package xmlmap turns one XML document into the structured value (maps,
// slices, strings) Bloblang mappings read, with the conventions Benthos's
// own XML processor documents: an element is a key of its parent's object;
// repeated elements become an array; attributes are keys prefixed with a
// hyphen ("-id"); the text of an element that also has attributes is the
// key "#text". Values are strings unless cast is set, which turns numbers
// and booleans into numbers and booleans.
//
// Invariant: a body that is not exactly one well-formed XML document is an
// error, never a partial value (a truncated listing must not look like a
// short page).
package xmlmap

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"

	"github.com/clbanning/mxj/v2"
)

// Parse converts b, one XML document, to its structured value.
func Parse(b []byte, cast bool) (map[string]any, error) {
	if err := wellFormed(b); err != nil {
		return nil, err
	}
	m, err := mxj.NewMapXml(b, cast)
	if err != nil {
		return nil, fmt.Errorf("xml: %w", err)
	}
	return map[string]any(m), nil
}

// wellFormed checks that b holds exactly one complete root element (and
// nothing but whitespace, comments and processing instructions around it).
func wellFormed(b []byte) error {
	dec := xml.NewDecoder(bytes.NewReader(b))
	dec.Strict = true
	depth, roots := 0, 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("xml: %w", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if depth == 0 {
				roots++
				if roots > 1 {
					return fmt.Errorf("xml: a second root element <%s> after the document", t.Name.Local)
				}
			}
			depth++
		case xml.EndElement:
			depth--
		case xml.CharData:
			if depth == 0 && len(bytes.TrimSpace(t)) > 0 {
				return errors.New("xml: text outside the root element")
			}
		}
	}
	switch {
	case roots == 0:
		return errors.New("xml: no root element")
	case depth != 0:
		return errors.New("xml: truncated document")
	}
	return nil
}
