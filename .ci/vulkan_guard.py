"""Make the pinned ggml-vulkan build against Vulkan headers older than 1.3.261 (Debian 12, Ubuntu 22.04).

ggml_vk_instance_init uses VK_EXT_layer_settings only to configure the validation layer; headers before
1.3.261 do not declare vk::LayerSettingEXT, and the build fails. This guards that block with the
extension's own macro and creates the instance without the layer settings where the headers lack them.

    python .ci/vulkan_guard.py LLAMA_CPP_PYTHON_SOURCE_FOLDER
"""

from __future__ import annotations

import sys
from pathlib import Path

SOURCE = "vendor/llama.cpp/ggml/src/ggml-vulkan/ggml-vulkan.cpp"
FIRST = "    VkBool32 enable_best_practice = layer_settings;\n"
LAST = (
    "    vk::InstanceCreateInfo instance_create_info(vk::InstanceCreateFlags{}, &app_info, layers, extensions, "
    "&layer_setting_info);\n"
)
PLAIN = "    vk::InstanceCreateInfo instance_create_info(vk::InstanceCreateFlags{}, &app_info, layers, extensions);\n"
MARK = "#ifdef VK_EXT_LAYER_SETTINGS_EXTENSION_NAME  // vramchat: .ci/vulkan_guard.py\n"


def guard(text: str) -> str:
    if MARK in text:
        return text  # already guarded
    start, end = text.find(FIRST), text.find(LAST)
    if start < 0 or end < start:
        raise SystemExit(f"{SOURCE}: the layer-settings block was not found: is this llama-cpp-python 0.3.36?")
    end += len(LAST)
    return text[:start] + MARK + text[start:end] + "#else\n" + PLAIN + "#endif\n" + text[end:]


def main() -> None:
    path = Path(sys.argv[1]) / SOURCE
    path.write_text(guard(path.read_text()))
    print(f"guarded VK_EXT_layer_settings in {path}")


if __name__ == "__main__":
    main()
