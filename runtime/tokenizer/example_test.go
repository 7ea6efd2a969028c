package tokenizer_test

import (
	"fmt"
	"path/filepath"

	"github.com/weft-inference/weft/internal/shareddata"
	"github.com/weft-inference/weft/runtime/gguf"
	"github.com/weft-inference/weft/runtime/tokenizer"
)

func Example() {
	f, err := gguf.Open(filepath.Join(shareddata.Dir(), "models", "stories260K.gguf"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer f.Close()
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		fmt.Println(err)
		return
	}
	ids := tok.Encode("Once upon a time", true, true)
	fmt.Println(ids)
	d := tok.NewStreamDecoder()
	for _, id := range ids {
		fmt.Printf("%q ", d.Add(id))
	}
	fmt.Printf("%q\n", d.Flush())
	fmt.Printf("%q\n", tok.Decode(ids))
	// Output:
	// [1 403 407 261 378]
	// "" " Once" " upon" " a" " time" ""
	// "Once upon a time"
}
