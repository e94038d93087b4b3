package plugin

import (
	"github.com/redpanda-data/benthos/v4/public/bloblang"

	"github.com/tidemark/tidemark/internal/xmlmap"
)

// tidemark_parse_xml: the XML reading of the http provider's `format: xml`,
// for mappings of other components (an XML partition list, an XML
// payload). Its name is tidemark's own: Redpanda Connect has a `parse_xml`
// method that accepts trailing data where this one refuses it, and
// Benthos keeps the last registration of a name without error, so a
// program linking both would silently get one of the two.
const parseXMLName = "tidemark_parse_xml"

func init() {
	spec := bloblang.NewPluginSpec().
		Category("Parsing").
		Description("Parses one XML document into a structured value: elements are keys, repeated elements arrays, attributes keys prefixed with `-`, the text of an element with attributes `#text`. Values are strings unless `cast` is true. A body that is not exactly one well-formed document is an error.").
		Param(bloblang.NewBoolParam("cast").Description("Turn numbers and booleans into numbers and booleans.").Default(false)).
		Example("Read an object listing", `root.keys = content().tidemark_parse_xml().ListBucketResult.Contents.map_each(c -> c.Key)`,
			[2]string{`<ListBucketResult><Contents><Key>a</Key></Contents><Contents><Key>b</Key></Contents></ListBucketResult>`, `{"keys":["a","b"]}`})
	if err := bloblang.RegisterMethodV2(parseXMLName, spec, func(args *bloblang.ParsedParams) (bloblang.Method, error) {
		cast, err := args.GetBool("cast")
		if err != nil {
			return nil, err
		}
		return bloblang.BytesMethod(func(b []byte) (any, error) {
			m, err := xmlmap.Parse(b, cast)
			if err != nil {
				return nil, err
			}
			return m, nil
		}), nil
	}); err != nil {
		panic(err)
	}
}
