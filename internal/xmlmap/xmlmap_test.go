package xmlmap

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const listing = `<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Name>bucket</Name>
  <IsTruncated>true</IsTruncated>
  <NextContinuationToken>tok/2==</NextContinuationToken>
  <Contents><Key>a.txt</Key><Size>3</Size></Contents>
  <Contents><Key>b.txt</Key><Size>5</Size></Contents>
  <Owner id="42">me</Owner>
</ListBucketResult>`

func TestParseListing(t *testing.T) {
	v, err := Parse([]byte(listing), false)
	require.NoError(t, err)
	root := v["ListBucketResult"].(map[string]any)
	assert.Equal(t, "true", root["IsTruncated"])
	assert.Equal(t, "tok/2==", root["NextContinuationToken"])
	contents := root["Contents"].([]any)
	require.Len(t, contents, 2, "repeated elements are an array")
	assert.Equal(t, map[string]any{"Key": "a.txt", "Size": "3"}, contents[0])
	assert.Equal(t, map[string]any{"-id": "42", "#text": "me"}, root["Owner"], "attributes are hyphenated, text is #text")

	cast, err := Parse([]byte(listing), true)
	require.NoError(t, err)
	croot := cast["ListBucketResult"].(map[string]any)
	assert.Equal(t, true, croot["IsTruncated"])
	assert.Equal(t, float64(5), croot["Contents"].([]any)[1].(map[string]any)["Size"])
}

func TestParseRefusesWhatIsNotOneDocument(t *testing.T) {
	for name, body := range map[string]string{
		"truncated":     listing[:len(listing)-30],
		"empty":         "",
		"two roots":     "<a/><b/>",
		"text outside":  "<a/>trailing",
		"html error":    "<html><body><h1>502 Bad Gateway</h1><hr></body></html",
		"not xml":       `{"json": true}`,
		"unclosed tags": "<a><b></a>",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(body), false)
			require.Error(t, err)
		})
	}
}
