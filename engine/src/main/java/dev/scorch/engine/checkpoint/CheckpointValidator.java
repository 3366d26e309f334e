package dev.scorch.engine.checkpoint;

import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.config.QuantizationConfig;
import dev.scorch.engine.model.WeightLayout;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/** Checks every tensor the config declares: present, right shape, a float dtype, FP8 weights with their block scales. */
public final class CheckpointValidator {
  private CheckpointValidator() {}

  public static ValidationReport validate(ModelConfig config, Checkpoint ckpt) {
    // Counts first: a config may declare more tensors than any file holds, and listing them costs memory in proportion.
    long declared = WeightLayout.count(config);
    if (declared > ckpt.tensorCount()) {
      return new ValidationReport(List.of(ckpt.dir().resolve("config.json") + ": num_hidden_layers " + config.numHiddenLayers()
          + " (with n_routed_experts " + config.nRoutedExperts() + ") declares " + declared + " tensors; the checkpoint holds "
          + ckpt.tensorCount() + " (named by its index or shard headers), so config.json does not describe these weights"),
          List.of(), List.of());
    }
    List<String> errors = new ArrayList<>();
    Set<String> expected = new HashSet<>();
    QuantizationConfig q = config.quantization();
    for (WeightLayout.Spec s : WeightLayout.of(config)) {
      expected.add(s.name());
      if (!ckpt.has(s.name())) {
        errors.add(ckpt.dir() + ": tensor '" + s.name() + "' is missing"
            + (s.layer() >= 0 ? " (layer " + s.layer() + " is declared by num_hidden_layers " + config.numHiddenLayers() + ")" : ""));
        continue;
      }
      TensorInfo t = ckpt.info(s.name());
      if (!t.hasShape(s.shape())) {
        errors.add(t.file() + ": tensor '" + s.name() + "' has shape " + t.shapeString() + ", config.json implies "
            + java.util.Arrays.toString(s.shape()));
        continue;
      }
      if (!t.dtype().isFloating()) {
        errors.add(t.file() + ": tensor '" + s.name() + "' has integer dtype " + t.dtype());
        continue;
      }
      if (t.dtype() == DType.F8_E4M3) {
        if (s.kind() != WeightLayout.Kind.LINEAR) {
          errors.add(t.file() + ": tensor '" + s.name() + "' is F8_E4M3 but only linear weights may be");
          continue;
        }
        int br = q == null ? 128 : q.blockRows();
        int bc = q == null ? 128 : q.blockCols();
        if (q == null) {
          errors.add(t.file() + ": tensor '" + s.name() + "' is F8_E4M3 but config.json has no quantization_config");
        }
        expected.add(s.scaleName());
        long[] scaleShape = {ceilDiv(s.shape()[0], br), ceilDiv(s.shape()[1], bc)};
        if (!ckpt.has(s.scaleName())) {
          errors.add(t.file() + ": tensor '" + s.scaleName() + "' (block scales of an F8_E4M3 weight) is missing");
        } else {
          TensorInfo sc = ckpt.info(s.scaleName());
          if (!sc.hasShape(scaleShape)) {
            errors.add(sc.file() + ": tensor '" + s.scaleName() + "' has shape " + sc.shapeString() + ", expected "
                + java.util.Arrays.toString(scaleShape) + " for " + br + "x" + bc + " blocks");
          } else if (!sc.dtype().isFloating() || sc.dtype() == DType.F8_E4M3) {
            errors.add(sc.file() + ": tensor '" + s.scaleName() + "' has dtype " + sc.dtype() + ", expected F32");
          }
        }
      }
    }
    List<String> ignored = new ArrayList<>();
    List<String> unexpected = new ArrayList<>();
    for (String name : ckpt.names()) {
      if (expected.contains(name)) {
        continue;
      }
      if (WeightLayout.ignored(name, config)) {
        ignored.add(name);
      } else if (name.endsWith("_scale_inv") && ckpt.has(name.substring(0, name.length() - "_scale_inv".length()))) {
        ignored.add(name); // scale of a weight that is not FP8: unused
      } else {
        unexpected.add(name);
      }
    }
    return new ValidationReport(List.copyOf(errors), List.copyOf(ignored), List.copyOf(unexpected));
  }

  static long ceilDiv(long a, long b) {
    return (a + b - 1) / b;
  }
}
